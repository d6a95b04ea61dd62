package replicate

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/pollux-dev/pollux/internal/core/inputs"
	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/platform/formdata"
)

// Replicate's files API (files.create, get, list, delete): the SDK
// uploads a Buffer, Blob or File input through POST /v1/files — its
// default fileEncodingStrategy — and puts the file's urls.get into the
// input, which a create turns back into the file's reference
// (pollux-input://). Files are the calling token's: another token's is
// not found.

// filesPath is the path of the files below the face's prefix.
const filesPath = "/v1/files/"

// maxFileMetadata bounds a create's metadata part.
const maxFileMetadata = 64 << 10

// file is Replicate's file object.
type file struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	ContentType string            `json:"content_type"`
	Size        int64             `json:"size"`
	Etag        string            `json:"etag"`
	Checksums   map[string]string `json:"checksums"`
	Metadata    json.RawMessage   `json:"metadata"`
	CreatedAt   string            `json:"created_at"`
	ExpiresAt   string            `json:"expires_at"`
	URLs        map[string]string `json:"urls"`
}

func (f *Face) fileOf(r *http.Request, in *inputs.File, metadata json.RawMessage) file {
	if len(metadata) == 0 {
		metadata = json.RawMessage("{}")
	}
	return file{
		ID: in.ID, Name: in.Name, ContentType: in.ContentType, Size: in.Size, Etag: in.SHA256,
		Checksums: map[string]string{"sha256": in.SHA256}, Metadata: metadata,
		CreatedAt: in.CreatedAt.Format(time.RFC3339Nano), ExpiresAt: in.ExpiresAt.Format(time.RFC3339Nano),
		URLs: map[string]string{"get": f.FileURL(r, filesPath, in.ID)},
	}
}

// createFile stores the content part of a multipart upload, streamed.
func (f *Face) createFile(w http.ResponseWriter, r *http.Request) error {
	files, err := f.Files(r)
	if err != nil {
		return err
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return &face.Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type", Field: "Content-Type",
			Message: "Content-Type: a file is uploaded as multipart/form-data (with its boundary), its bytes in the part named content"}
	}
	// The content part streams into the bucket in pieces as large as
	// the network delivers them (formdata, not mime/multipart's 4 KiB).
	mr := formdata.NewReader(r.Body, params["boundary"])
	var stored *inputs.File
	var metadata json.RawMessage
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return badRequest("content", "reading the multipart body: "+err.Error())
		}
		switch part.FormName() {
		case "content":
			if stored != nil {
				return invalid("content", "content: one file an upload")
			}
			if stored, err = files.Put(r, w, "content", part.FileName(), part.Header.Get("Content-Type"), part); err != nil {
				return err
			}
		case "metadata":
			b, err := io.ReadAll(io.LimitReader(part, maxFileMetadata+1))
			if err != nil || len(b) > maxFileMetadata || !json.Valid(b) {
				return invalid("metadata", "metadata: a JSON value of at most "+strconv.Itoa(maxFileMetadata)+" bytes")
			}
			metadata = b
		}
		_ = part.Close()
	}
	if stored == nil {
		return invalid("content", "content: required, the file's bytes")
	}
	return face.WriteJSON(w, http.StatusCreated, f.fileOf(r, stored, metadata))
}

// getFile answers one of the caller's files.
func (f *Face) getFile(w http.ResponseWriter, r *http.Request) error {
	in, err := f.callerFile(r)
	if err != nil {
		return err
	}
	return face.WriteJSON(w, http.StatusOK, f.fileOf(r, in, nil))
}

// downloadFile answers one of the caller's files' bytes.
func (f *Face) downloadFile(w http.ResponseWriter, r *http.Request) error {
	if _, err := f.callerFile(r); err != nil {
		return err
	}
	return f.ServeFile(w, r, r.PathValue("id"))
}

// callerFile is the caller's file the path names, or Replicate's 404.
func (f *Face) callerFile(r *http.Request) (*inputs.File, error) {
	files, err := f.Files(r)
	if err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	in, err := files.Get(r.Context(), id)
	if fe := (*face.Error)(nil); errors.As(err, &fe) && fe.Status == http.StatusNotFound {
		return nil, notFound("no file " + id)
	}
	return in, err
}

// fileList is Replicate's page of files.
type fileList struct {
	Previous *string `json:"previous"`
	Next     *string `json:"next"`
	Results  []file  `json:"results"`
}

// listFiles answers the caller's files, newest first, on one page.
func (f *Face) listFiles(w http.ResponseWriter, r *http.Request) error {
	files, err := f.Files(r)
	if err != nil {
		return err
	}
	all, err := files.Store.List(r.Context(), files.Owner)
	if err != nil {
		return err
	}
	out := fileList{Results: make([]file, 0, len(all))}
	for i := len(all) - 1; i >= 0; i-- {
		out.Results = append(out.Results, f.fileOf(r, all[i], nil))
	}
	return face.WriteJSON(w, http.StatusOK, out)
}

// deleteFile deletes one of the caller's files: 204, as Replicate.
func (f *Face) deleteFile(w http.ResponseWriter, r *http.Request) error {
	files, err := f.Files(r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	err = files.Store.Delete(r.Context(), files.Owner, id)
	switch {
	case errors.Is(err, inputs.ErrNotFound):
		return notFound("no file " + id)
	case err != nil:
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
