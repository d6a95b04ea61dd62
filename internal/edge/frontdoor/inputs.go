package frontdoor

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/pollux-dev/pollux/internal/core/inputs"
	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
)

// Input files (package inputs): the faces take uploads into
// Config.Inputs as their callers' files (facade.Files); every submission
// naming a file is checked here (checkInputs) before it is published;
// and two paths are answered to anyone holding a signed URL, without a
// token: a provider's fetch of a file (GET inputs.FetchPath) and an
// app's PUT of an upload it was issued (inputs.UploadPath, fal's
// upload_url).

// inputPath reports whether path is one of the signed input paths.
func inputPath(path string) bool {
	id, rest, _ := cutInputPath(path)
	return id != "" && (rest == "" || rest == "/upload")
}

func cutInputPath(path string) (id, rest string, ok bool) {
	const prefix = "/v1/inputs/"
	if len(path) <= len(prefix) || path[:len(prefix)] != prefix {
		return "", "", false
	}
	tail := path[len(prefix):]
	for i := range len(tail) {
		if tail[i] == '/' {
			return tail[:i], tail[i:], true
		}
	}
	return tail, "", true
}

// checkInputs refuses a submission whose input names a file that is not
// the caller's, or is gone or about to expire, naming the field.
func (s *Server) checkInputs(ctx context.Context, r *http.Request, m events.Submit) *apiError {
	if !inputs.HasRefs(m.Input) {
		return nil
	}
	if s.cfg.Inputs == nil {
		return fail(http.StatusBadRequest, CodeInvalidParameter, "input", "input: this Pollux keeps no input files, so none can be named")
	}
	err := s.cfg.Inputs.Check(ctx, who(r).filesOwner(r), m.Input, "input")
	var re *inputs.RefError
	switch {
	case errors.As(err, &re):
		return fail(http.StatusBadRequest, CodeInvalidParameter, re.Field, err.Error())
	case err != nil:
		return s.unavailable(err, "reading the input files")
	}
	return nil
}

// fetchInput serves a file to a signed URL's GET (a provider's).
func (s *Server) fetchInput(w http.ResponseWriter, r *http.Request) *apiError {
	if s.cfg.Inputs == nil {
		return fail(http.StatusNotFound, CodeNotFound, "", "no such file")
	}
	f, body, err := s.cfg.Inputs.Fetch(r.Context(), r.PathValue("id"), r.URL.Query())
	switch {
	case errors.Is(err, inputs.ErrBadSignature):
		return fail(http.StatusForbidden, CodeForbidden, "sig", err.Error())
	case errors.Is(err, inputs.ErrNotFound):
		return fail(http.StatusNotFound, CodeNotFound, "", "no such file (expired or deleted)")
	case err != nil:
		return s.unavailable(err, "reading an input file")
	}
	defer body.Close()
	w.Header().Set("Content-Type", f.ContentType)
	w.Header().Set("Content-Length", strconv.FormatInt(f.Size, 10))
	w.Header().Set("Cache-Control", "private, no-store")
	if r.Method == http.MethodHead {
		return nil
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(face.UploadTimeout))
	if _, err := io.Copy(w, body); err != nil {
		s.log.Debug().Err(err).Str(logkey.FileID, f.ID).Msg("serving an input file ended early")
	}
	return nil
}

// uploadInput stores the body of a PUT to an upload URL that was issued
// (fal's upload_url): once.
func (s *Server) uploadInput(w http.ResponseWriter, r *http.Request) *apiError {
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(face.UploadTimeout))
	if e := s.redeem(r, r.Header.Get("Content-Type"), r.Body); e != nil {
		return e
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// maxFormField bounds a form field of an upload besides its file.
const maxFormField = 64 << 10

// uploadInputForm stores the file of a multipart POST to an upload URL
// that was issued, as a storage bucket's POST policy takes one (Runway's
// uploadUrl, which its SDK posts its fields and then the file part named
// file to): once. The other fields (at most 64 KiB each) are read and
// left; a form with no file part is a 400. Answered 204, as S3 does.
func (s *Server) uploadInputForm(w http.ResponseWriter, r *http.Request) *apiError {
	mr, err := r.MultipartReader()
	if err != nil {
		return fail(http.StatusUnsupportedMediaType, CodeInvalidParameter, "Content-Type", "an upload is multipart/form-data, its file in the part named file")
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(face.UploadTimeout))
	for {
		part, err := mr.NextPart()
		if err != nil {
			return fail(http.StatusBadRequest, CodeInvalidParameter, "file", "the form has no part named file")
		}
		if part.FormName() != "file" {
			if n, _ := io.Copy(io.Discard, io.LimitReader(part, maxFormField+1)); n > maxFormField {
				return fail(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, part.FormName(), part.FormName()+": a field of more than 64 KiB")
			}
			continue
		}
		if e := s.redeem(r, part.Header.Get("Content-Type"), part); e != nil {
			return e
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

// redeem stores body as the file of the upload request r's URL was issued
// for (inputs.Store.Redeem), or says why not.
func (s *Server) redeem(r *http.Request, contentType string, body io.Reader) *apiError {
	if s.cfg.Inputs == nil {
		return fail(http.StatusNotFound, CodeNotFound, "", "no such upload")
	}
	f, err := s.cfg.Inputs.Redeem(r.Context(), r.PathValue("id"), r.URL.Query(), contentType, body)
	var tl *inputs.TooLargeError
	switch {
	case errors.Is(err, inputs.ErrBadSignature):
		return fail(http.StatusForbidden, CodeForbidden, "sig", err.Error())
	case errors.As(err, &tl):
		return fail(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "body", err.Error())
	case errors.Is(err, inputs.ErrEmpty):
		return fail(http.StatusBadRequest, CodeInvalidParameter, "body", err.Error())
	case err != nil:
		return s.unavailable(err, "storing an upload")
	}
	s.log.Debug().Str(logkey.FileID, f.ID).Int64(logkey.Bytes, f.Size).Msg("upload stored")
	return nil
}

// Files is the caller's input files (face.Pollux).
func (f facade) Files(r *http.Request) (*face.Files, error) {
	if f.s.cfg.Inputs == nil {
		return face.NoFiles()
	}
	return &face.Files{Store: f.s.cfg.Inputs, Owner: who(r).filesOwner(r)}, nil
}
