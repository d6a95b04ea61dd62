package genai

import (
	"encoding/base64"
	"net/http"
	"strconv"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/pkg/state"
)

// api is which of Google's APIs a request speaks: they differ in their
// operations' names and responses.
type api int

const (
	// gemini is the Gemini API (generativelanguage.googleapis.com).
	gemini api = iota
	// vertex is Vertex AI's express mode (aiplatform.googleapis.com with
	// an API key), which @google/genai 3.1.0 sends generateVideos to.
	vertex
)

// metaModel is the metadata key of the model a create's path named.
const metaModel = "genai_model"

// operation is Google's long-running operation, as the SDK reads it.
type operation struct {
	Name     string         `json:"name"`
	Done     bool           `json:"done,omitempty"`
	Response map[string]any `json:"response,omitempty"`
	Error    *status        `json:"error,omitempty"`
}

// status is a google.rpc.Status.
type status struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status,omitempty"`
	Details []any  `json:"details,omitempty"`
}

// ended are the google.rpc codes of a job that ended without videos.
var ended = map[state.State]int{state.Failed: 13, state.Canceled: 1, state.Expired: 4, state.Lost: 2}

// operation is job j as an operation of api, for request r: its name, and
// once the job has ended its videos or its error.
func (f *Face) operation(r *http.Request, j *state.Job, a api, publisher string) operation {
	model := j.Metadata[metaModel]
	op := operation{Name: "models/" + model + "/operations/" + j.ID}
	if a == vertex {
		op.Name = "publishers/" + publisher + "/" + op.Name
	}
	if !j.State.Terminal() {
		return op
	}
	op.Done = true
	if code, ok := ended[j.State]; ok {
		msg := j.Reason
		if msg == "" {
			msg = "the video generation ended " + string(j.State)
		}
		op.Error = &status{Code: code, Message: msg}
		return op
	}
	version := r.PathValue("version")
	var videos []map[string]any
	for n := range j.Outputs {
		if _, ok := f.OutputURL(r, j, n); !ok {
			continue // nothing Pollux may hand on
		}
		uri := f.Base(r) + "/" + version + "/files/" + j.ID + strconv.Itoa(n) + ":download?alt=media"
		if a == vertex {
			videos = append(videos, map[string]any{"gcsUri": uri, "mimeType": "video/mp4"})
		} else {
			videos = append(videos, map[string]any{"video": map[string]any{"uri": uri}})
		}
	}
	if a == vertex {
		op.Response = map[string]any{"@type": "type.googleapis.com/cloud.ai.large_models.vision.GenerateVideoResponse", "videos": videos}
	} else {
		op.Response = map[string]any{"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse",
			"generateVideoResponse": map[string]any{"generatedSamples": videos}}
	}
	return op
}

// statuses are google.rpc's canonical names by HTTP status.
var statuses = map[int]string{
	http.StatusBadRequest:            "INVALID_ARGUMENT",
	http.StatusUnauthorized:          "UNAUTHENTICATED",
	http.StatusForbidden:             "PERMISSION_DENIED",
	http.StatusNotFound:              "NOT_FOUND",
	http.StatusConflict:              "ABORTED",
	http.StatusRequestEntityTooLarge: "INVALID_ARGUMENT",
	http.StatusUnsupportedMediaType:  "INVALID_ARGUMENT",
	http.StatusUnprocessableEntity:   "INVALID_ARGUMENT",
	http.StatusTooManyRequests:       "RESOURCE_EXHAUSTED",
	http.StatusServiceUnavailable:    "UNAVAILABLE",
}

// WriteError writes e as Google does: {"error": {code, message, status}},
// a field at fault as a google.rpc.BadRequest field violation.
func (f *Face) WriteError(w http.ResponseWriter, e *face.Error) {
	e.SetHeaders(w.Header())
	s := status{Code: e.Status, Message: e.Message, Status: statuses[e.Status]}
	switch {
	case s.Status == "" && e.Status >= 500:
		s.Status = "INTERNAL"
	case s.Status == "":
		s.Status = "FAILED_PRECONDITION"
	}
	if e.Status == http.StatusUnauthorized {
		s.Message = "API key not valid. Please pass a valid API key: a Pollux token of the front door's tokens file, as x-goog-api-key."
	}
	if s.Message == "" {
		s.Message = http.StatusText(e.Status)
	}
	if e.Field != "" {
		s.Details = []any{map[string]any{"@type": "type.googleapis.com/google.rpc.BadRequest",
			"fieldViolations": []any{map[string]string{"field": e.Field, "description": s.Message}}}}
	}
	_ = face.WriteJSON(w, e.Status, struct { // always encodes
		Error status `json:"error"`
	}{s})
}

func base64OK(s string) bool {
	_, err := base64.StdEncoding.DecodeString(s)
	return err == nil
}
