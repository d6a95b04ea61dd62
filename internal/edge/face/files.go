package face

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/internal/core/inputs"
	"github.com/pollux-dev/pollux/internal/platform/safehttp"
)

// Files are the input files of one caller — the front door's name of the
// request's token — in Pollux's inputs bucket (package inputs): what a
// face's upload paths store and read, each refusal a *Error the face
// writes in its shape. Another caller's file is not found, as an unknown
// one.
type Files struct {
	// Store keeps the files; Owner is the caller.
	Store *inputs.Store
	Owner string
}

// UploadTimeout bounds the reading of one upload's body: the front door's
// ReadTimeout (seconds) would cut a large file short.
const UploadTimeout = 10 * time.Minute

// Put streams body into a new file of the caller's. field names the part
// of the request that carries it, for the errors.
func (f Files) Put(r *http.Request, w http.ResponseWriter, field, name, contentType string, body io.Reader) (*inputs.File, error) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(UploadTimeout))
	ahead := newReadAhead(body)
	file, err := f.Store.Put(r.Context(), inputs.Upload{Owner: f.Owner, Name: name, ContentType: contentType, Body: ahead})
	ahead.finish(rc)
	if err != nil {
		return nil, FileError(err, field)
	}
	return file, nil
}

// Get is the caller's file id: ErrNotFound's *Error (404) when the caller
// has none of that id.
func (f Files) Get(ctx context.Context, id string) (*inputs.File, error) {
	file, err := f.Store.Get(ctx, f.Owner, id)
	if err != nil {
		return nil, FileError(err, "")
	}
	return file, nil
}

// FileError is a store's error as a face answers it: a file past a limit
// 413, an empty one 400, no such file 404, each naming field; anything
// else as it is (Serve answers it 503).
func FileError(err error, field string) error {
	var tl *inputs.TooLargeError
	var re *inputs.RefError
	switch {
	case errors.As(err, &tl):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: "file_too_large", Field: field, Message: err.Error(), Err: err}
	case errors.Is(err, inputs.ErrEmpty):
		return &Error{Status: http.StatusBadRequest, Code: "invalid_file", Field: field, Message: field + ": the file is empty", Err: err}
	case errors.As(err, &re):
		return &Error{Status: http.StatusBadRequest, Code: "invalid_file", Field: re.Field, Message: err.Error(), Err: err}
	case errors.Is(err, inputs.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: "file_not_found", Field: field, Message: "no such file", Err: err}
	case errors.Is(err, inputs.ErrBadSignature):
		return &Error{Status: http.StatusForbidden, Code: "invalid_upload_url", Field: field, Message: err.Error(), Err: err}
	}
	return err
}

// MaxDataBody bounds a create's JSON body, which may carry files as data:
// URIs (Refs takes them out: the submission is bounded as ever).
const MaxDataBody = 16 << 20

// MinInlineData is the shortest data: URI in a create's input that is
// kept as a file (Refs): a shorter one stays in the input.
const MinInlineData = 64 << 10

// Refs is a create's input with each file it carries by the face's own
// URL or as a large data: URI replaced by its reference
// (pollux-input://<id>), which the front door checks (the caller's, not
// expired) before it submits the job. fileID says whether a string is
// one of the face's file URLs, and which file. A data: URI that does not
// decode is a *Error naming its field.
func (f *Files) Refs(r *http.Request, w http.ResponseWriter, input json.RawMessage, root string, fileID func(string) (string, bool)) (json.RawMessage, error) {
	var found bool
	out, err := inputs.Walk(input, root, func(path, s string) (string, error) {
		if id, ok := fileID(s); ok {
			found = true
			return inputs.Scheme + id, nil
		}
		if len(s) < MinInlineData || !strings.HasPrefix(s, "data:") || f == nil || f.Store == nil {
			return s, nil
		}
		ct, data, ok := decodeDataURI(s)
		if !ok {
			return "", &Error{Status: http.StatusBadRequest, Code: "invalid_parameter", Field: path, Message: path + ": a data: URI that is not base64 (data:<type>;base64,<data>)"}
		}
		file, err := f.Put(r, w, path, "", ct, base64.NewDecoder(base64.StdEncoding, strings.NewReader(data)))
		if err != nil {
			return "", err
		}
		found = true
		return file.Ref(), nil
	})
	if err != nil {
		var fe *Error
		if errors.As(err, &fe) {
			return nil, err
		}
		return nil, &Error{Status: http.StatusBadRequest, Code: "invalid_parameter", Field: root, Message: err.Error(), Err: err}
	}
	if !found {
		return input, nil
	}
	return out, nil
}

// CheckInputURL checks s, the URL of an input file an app gives at
// field, which the provider will fetch: a reference to a file Pollux
// keeps (what DataRefs made of a face's own file URI), a data: URI (a
// large one is kept as a file: DataRefs), or an http(s) URL as safehttp.CheckURL takes one
// with private addresses refused — https, no credentials, no address
// of Pollux's own networks. Anything else is a *Error naming field.
func CheckInputURL(field, s string) error {
	if _, ok := inputs.ParseRef(s); ok {
		return nil // a file of Pollux's: the front door checks it is the caller's
	}
	if strings.HasPrefix(s, "data:") {
		if _, _, ok := decodeDataURI(s); !ok {
			return &Error{Status: http.StatusBadRequest, Code: "invalid_parameter", Field: field, Message: field + ": a data: URI that is not base64 (data:<type>;base64,<data>)"}
		}
		return nil
	}
	if err := safehttp.CheckURL(s, false); err != nil {
		return &Error{Status: http.StatusBadRequest, Code: "invalid_parameter", Field: field, Message: field + ": an https URL or a data: URI; " + err.Error(), Err: err}
	}
	return nil
}

// decodeDataURI splits a base64 data: URI into its media type and data.
func decodeDataURI(s string) (contentType, data string, ok bool) {
	head, data, ok := strings.Cut(strings.TrimPrefix(s, "data:"), ",")
	if !ok {
		return "", "", false
	}
	ct, b64 := strings.CutSuffix(head, ";base64")
	return ct, data, b64
}

// FileURL is Kit's URL of a file of the face, below its prefix at path
// (path + id), and FileOf its inverse: the file id a string names when it
// is such a URL on the request's host, whatever its scheme.
func (k *Kit) FileURL(r *http.Request, path, id string) string { return k.Base(r) + path + id }

// FileOf is the id of the file s names as the face's URL of it (FileURL
// with path), on request r's host.
func (k *Kit) FileOf(r *http.Request, path, s string) (string, bool) {
	if !strings.HasPrefix(s, "http") {
		return "", false
	}
	u, err := url.Parse(s)
	if err != nil || u.Host != r.Host || (u.Scheme != "http" && u.Scheme != "https") {
		return "", false
	}
	id, ok := strings.CutPrefix(u.Path, k.mount.Prefix+path)
	return id, ok && inputs.ValidID(id)
}

// IssueUpload issues an upload of one file of request r's caller's, in
// two steps as fal's and Runway's SDKs make one (inputs.Store.Issue): it
// returns the file's id to be and the signed, expiring, single-use URL on
// the front door (inputs.UploadPath) that takes its bytes with no token.
func (k *Kit) IssueUpload(r *http.Request, name, contentType string) (id, uploadURL string, err error) {
	files, err := k.pollux.Files(r)
	if err != nil {
		return "", "", err
	}
	t, err := files.Store.Issue(r.Context(), files.Owner, name, contentType)
	if err != nil {
		return "", "", err
	}
	base := k.Base(r)
	return t.ID, t.UploadURL(base[:len(base)-len(k.mount.Prefix)]), nil
}

// Files are request r's caller's input files (Pollux.Files).
func (k *Kit) Files(r *http.Request) (*Files, error) {
	return k.pollux.Files(r)
}

// errNoInputs is the answer of a Pollux that keeps no input files.
var errNoInputs = &Error{Status: http.StatusNotImplemented, Code: "not_implemented", Message: "this Pollux keeps no input files"}

// NoFiles is Pollux.Files of a Pollux that keeps no input files.
func NoFiles() (*Files, error) { return nil, errNoInputs }

// InputRefs is a create's input (below root, for the field names of its
// errors) with request r's caller's files named by the face's URLs of
// them (FileURL with filesPath), or carried as large data: URIs, replaced
// by their references (Files.Refs). A Pollux that keeps no files leaves
// the input as it is.
func (k *Kit) InputRefs(w http.ResponseWriter, r *http.Request, input json.RawMessage, root, filesPath string) (json.RawMessage, error) {
	files, err := k.pollux.Files(r)
	if err != nil && !errors.Is(err, errNoInputs) {
		return nil, err
	}
	return files.Refs(r, w, input, root, func(s string) (string, bool) { return k.FileOf(r, filesPath, s) })
}

// DataRefs is InputRefs for a face whose files are not URLs of its own
// (Runway's runwayUri) or that has none (Luma's): each string fileID
// names a file by (nil: none) and each large data: URI of the input
// becomes a reference to a file of request r's caller's.
func (k *Kit) DataRefs(w http.ResponseWriter, r *http.Request, input json.RawMessage, root string, fileID func(string) (string, bool)) (json.RawMessage, error) {
	files, err := k.pollux.Files(r)
	if err != nil && !errors.Is(err, errNoInputs) {
		return nil, err
	}
	if fileID == nil {
		fileID = func(string) (string, bool) { return "", false }
	}
	return files.Refs(r, w, input, root, fileID)
}

// KeepBase64 keeps b64, a file's bytes in standard base64 that the
// input of a create carries at field (genai's bytesBase64Encoded), as a
// file of request r's caller's, and returns its reference — when it is
// at least MinInlineData long and this Pollux keeps files; else ""
// (the bytes stay in the input). The caller has checked b64 decodes.
func (k *Kit) KeepBase64(w http.ResponseWriter, r *http.Request, field, contentType, b64 string) (string, error) {
	if len(b64) < MinInlineData {
		return "", nil
	}
	files, err := k.pollux.Files(r)
	switch {
	case errors.Is(err, errNoInputs):
		return "", nil
	case err != nil:
		return "", err
	}
	file, err := files.Put(r, w, field, "", contentType, base64.NewDecoder(base64.StdEncoding, strings.NewReader(b64)))
	if err != nil {
		return "", err
	}
	return file.Ref(), nil
}

// ServeFile answers the bytes of request r's caller's file id.
func (k *Kit) ServeFile(w http.ResponseWriter, r *http.Request, id string) error {
	files, err := k.pollux.Files(r)
	if err != nil {
		return err
	}
	f, err := files.Get(r.Context(), id)
	if err != nil {
		return err
	}
	_, body, err := files.Store.Open(r.Context(), f.ID)
	if err != nil {
		return FileError(err, "")
	}
	defer body.Close()
	w.Header().Set("Content-Type", f.ContentType)
	w.Header().Set("Content-Length", strconv.FormatInt(f.Size, 10))
	_, _ = io.Copy(w, body)
	return nil
}

// ShowRefs is input as an app sees it: each file reference replaced by
// the face's URL of the file (FileURL with filesPath), as the app sent
// it. An input that does not parse is shown as it is.
func (k *Kit) ShowRefs(r *http.Request, input json.RawMessage, filesPath string) json.RawMessage {
	if !inputs.HasRefs(input) {
		return input
	}
	out, err := inputs.Walk(input, "input", func(_, s string) (string, error) {
		if id, ok := inputs.ParseRef(s); ok {
			return k.FileURL(r, filesPath, id), nil
		}
		return s, nil
	})
	if err != nil {
		return input
	}
	return out
}
