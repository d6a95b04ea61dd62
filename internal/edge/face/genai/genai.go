package genai

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/pkg/events"
)

// Bounds of the face.
const (
	// maxBody bounds a create's body, inline images included: large ones
	// are kept as input files (keepImages), so the submission stays
	// small.
	maxBody = face.MaxDataBody
	// idLen is the length of an operation id: 16 bytes in base32.
	idLen = 26
)

// versions are the API versions the SDK may send (the Gemini API's v1,
// v1beta, v1alpha; Vertex AI's v1, v1beta1).
var versions = map[string]bool{"v1": true, "v1beta": true, "v1alpha": true, "v1beta1": true}

// Face is Google's Veo API over Pollux.
type Face struct{ *face.Kit }

// New builds the face of mount m over p (a face.New).
func New(m face.Mount, p face.Pollux) face.Face {
	f := &Face{}
	f.Kit = face.NewKit(m, p, f)
	return f
}

// Handler serves the Gemini API's and Vertex AI's video endpoints below
// the mount's prefix; a model call is {model}:{method}, one path segment.
func (f *Face) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /{version}/models/{call}", face.Serve(f, func(w http.ResponseWriter, r *http.Request) error {
		return f.call(w, r, gemini, "")
	}))
	mux.Handle("POST /{version}/publishers/{publisher}/models/{call}", face.Serve(f, func(w http.ResponseWriter, r *http.Request) error {
		return f.call(w, r, vertex, r.PathValue("publisher"))
	}))
	mux.Handle("GET /{version}/models/{model}/operations/{id}", face.Serve(f, f.get))
	mux.Handle("GET /{version}/files/{file}", face.Serve(f, f.download))
	mux.Handle("/", face.Serve(f, func(_ http.ResponseWriter, r *http.Request) error { return unknownPath(r) }))
	return mux
}

func unknownPath(r *http.Request) error {
	return &face.Error{Status: http.StatusNotFound, Code: "not_found",
		Message: "Pollux's genai face serves predictLongRunning, its operations and their files; not " + r.Method + " " + r.URL.Path}
}

// NotFound is the answer about an operation the face may not see.
func (f *Face) NotFound(id string) *face.Error {
	return &face.Error{Status: http.StatusNotFound, Code: "not_found", Message: "Operation " + strconv.Quote(id) + " not found."}
}

// Mints reports whether id is an operation id the face makes: 26
// characters of lowercase base32.
func (f *Face) Mints(id string) bool { return face.IsBase32ID(id) }

// call serves a model call: predictLongRunning (both APIs), and Vertex
// AI's fetchPredictOperation — the SDK's getVideosOperation there.
func (f *Face) call(w http.ResponseWriter, r *http.Request, api api, publisher string) error {
	model, method, _ := strings.Cut(r.PathValue("call"), ":")
	switch {
	case !versions[r.PathValue("version")]:
		return unknownPath(r)
	case !events.ValidToken(strings.ReplaceAll(model, ".", "_")) || (api == vertex && !events.ValidToken(publisher)):
		return invalid("model", "model: "+strconv.Quote(publisher+"/"+model)+" is not a model name")
	case method == "predictLongRunning":
		return f.create(w, r, api, publisher, model)
	case method == "fetchPredictOperation" && api == vertex:
		return f.fetch(w, r, publisher, model)
	}
	return unknownPath(r)
}

// create submits a predictLongRunning body as a job, answered with its
// operation.
func (f *Face) create(w http.ResponseWriter, r *http.Request, api api, publisher, model string) error {
	key, err := face.IdempotencyKey(r)
	if err != nil {
		return err
	}
	body, err := face.ReadBody(w, r, maxBody)
	if err != nil {
		return err
	}
	if err := checkBody(body); err != nil {
		return err
	}
	if body, err = f.keepImages(w, r, body); err != nil {
		return err
	}
	submitted := model
	if api == vertex && publisher != "google" {
		submitted = publisher + "/" + model // what the SDK's tModel made of "publisher/model"
	}
	id := face.Base32.EncodeToString(face.IDBytes(r.Context(), face.GenAI, f.Mount().Route, key, 16))
	m := events.Submit{V: events.Version, ID: id, IdempotencyKey: key, Model: submitted, Input: body,
		Metadata: map[string]string{face.MetaFace: string(face.GenAI), metaModel: model}}
	j, err := f.Create(r, m)
	if err != nil {
		return err
	}
	return face.WriteJSON(w, http.StatusOK, f.operation(r, j, api, publisher))
}

// get is the Gemini API's operations.get: GET /{version}/models/{model}/operations/{id}.
func (f *Face) get(w http.ResponseWriter, r *http.Request) error {
	if !versions[r.PathValue("version")] {
		return unknownPath(r)
	}
	j, err := f.Poll(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	return face.WriteJSON(w, http.StatusOK, f.operation(r, j, gemini, ""))
}

// fetch is Vertex AI's fetchPredictOperation: the operation its body
// names.
func (f *Face) fetch(w http.ResponseWriter, r *http.Request, publisher, model string) error {
	body, err := face.ReadBody(w, r, 4096)
	if err != nil {
		return err
	}
	var b struct {
		OperationName string `json:"operationName"`
	}
	if err := face.DecodeObject(body, &b); err != nil {
		return err
	}
	prefix, id, ok := strings.Cut(b.OperationName, "/operations/")
	if !ok || !strings.HasSuffix(prefix, "models/"+model) {
		return &face.Error{Status: http.StatusBadRequest, Code: "invalid_field", Field: "operationName",
			Message: "operationName: an operation of publishers/" + publisher + "/models/" + model}
	}
	j, err := f.Poll(r, id)
	if err != nil {
		return err
	}
	return face.WriteJSON(w, http.StatusOK, f.operation(r, j, vertex, publisher))
}

// download serves files/{file}:download: the bytes output custody kept,
// else a redirect to the provider's URL (face.Kit.Output).
func (f *Face) download(w http.ResponseWriter, r *http.Request) error {
	file, ok := strings.CutSuffix(r.PathValue("file"), ":download")
	if !versions[r.PathValue("version")] || !ok {
		return unknownPath(r)
	}
	n, err := strconv.Atoi(file[min(idLen, len(file)):])
	if err != nil || len(file) <= idLen || strconv.Itoa(n) != file[idLen:] {
		return f.NotFound(file)
	}
	j, err := f.Job(r, file[:idLen])
	if err != nil {
		return err
	}
	if err := f.Output(w, r, j, n); errors.Is(err, face.ErrOutputNotFound) {
		return &face.Error{Status: http.StatusNotFound, Code: "not_found", Message: "File files/" + file + " not found.", Err: err}
	} else if err != nil {
		return err
	}
	return nil
}

// checkBody checks a predictLongRunning body as the API does: instances,
// one, an object with a prompt or an image; parameters an object; inline
// image bytes base64. The rest is the model's to judge.
func checkBody(body []byte) error {
	var b struct {
		Instances  []map[string]json.RawMessage `json:"instances"`
		Parameters map[string]json.RawMessage   `json:"parameters"`
	}
	if err := face.DecodeObject(body, &b); err != nil {
		return err
	}
	var top map[string]json.RawMessage
	_ = json.Unmarshal(body, &top) // an object: decoded above
	for name := range top {
		if name != "instances" && name != "parameters" {
			return invalid(name, "Invalid JSON payload received. Unknown name "+strconv.Quote(name)+": Cannot find field.")
		}
	}
	if len(b.Instances) != 1 || b.Instances[0] == nil {
		return invalid("instances", "instances: exactly one instance, an object")
	}
	in := b.Instances[0]
	if _, ok := in["prompt"]; !ok && in["image"] == nil {
		return invalid("instances[0].prompt", "instances[0]: a prompt, an image, or both")
	}
	var prompt *string
	if p, ok := in["prompt"]; ok && json.Unmarshal(p, &prompt) != nil {
		return invalid("instances[0].prompt", "instances[0].prompt: a string")
	}
	for _, name := range images {
		if in[name] == nil {
			continue
		}
		var img struct {
			Bytes    *string `json:"bytesBase64Encoded"`
			GCS      *string `json:"gcsUri"`
			MimeType string  `json:"mimeType"`
		}
		field := "instances[0]." + name
		switch {
		case json.Unmarshal(in[name], &img) != nil || (img.Bytes == nil) == (img.GCS == nil):
			return invalid(field, field+": an object of bytesBase64Encoded (with mimeType) or gcsUri")
		case img.Bytes != nil && !base64OK(*img.Bytes):
			return invalid(field+".bytesBase64Encoded", field+".bytesBase64Encoded: not base64")
		case img.Bytes != nil && !strings.HasPrefix(img.MimeType, "image/"):
			return invalid(field+".mimeType", field+".mimeType: an image type, such as image/png")
		}
	}
	return nil
}

// images are the fields of an instance that carry an image.
var images = []string{"image", "lastFrame"}

// keepImages is a create's body (checked: checkBody) with each large
// inline image (bytesBase64Encoded, what the SDK makes of imageBytes)
// kept as an input file of the caller's and named by its reference
// (face.Kit.KeepBase64); the route gives its provider the file as it
// takes one. A body with none is returned as it is.
func (f *Face) keepImages(w http.ResponseWriter, r *http.Request, body []byte) ([]byte, error) {
	var b map[string]json.RawMessage
	var instances []map[string]json.RawMessage
	if json.Unmarshal(body, &b) != nil || json.Unmarshal(b["instances"], &instances) != nil || len(instances) != 1 {
		return body, nil // checkBody judged it
	}
	kept := false
	for _, name := range images {
		var img map[string]json.RawMessage
		var b64, mimeType string
		if instances[0][name] == nil || json.Unmarshal(instances[0][name], &img) != nil || json.Unmarshal(img["bytesBase64Encoded"], &b64) != nil {
			continue
		}
		_ = json.Unmarshal(img["mimeType"], &mimeType) // checked: a string
		field := "instances[0]." + name + ".bytesBase64Encoded"
		ref, err := f.KeepBase64(w, r, field, mimeType, b64)
		if err != nil {
			return nil, err
		}
		if ref == "" {
			continue
		}
		img["bytesBase64Encoded"], _ = json.Marshal(ref)
		instances[0][name], _ = json.Marshal(img)
		kept = true
	}
	if !kept {
		return body, nil
	}
	b["instances"], _ = json.Marshal(instances)
	return json.Marshal(b)
}

func invalid(field, msg string) *face.Error {
	return &face.Error{Status: http.StatusBadRequest, Code: "invalid_field", Field: field, Message: msg}
}
