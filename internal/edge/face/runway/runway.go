package runway

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Bounds of the face.
const (
	// maxBody bounds a create's body, data: URIs included: large ones are
	// kept as input files (face.Kit.DataRefs), so the submission stays
	// small.
	maxBody = face.MaxDataBody
	// Version is the X-Runway-Version the face serves: the API version
	// @runwayml/sdk 4.20.1 sends.
	Version = "2024-11-06"
)

// endpoints are the task creates of video the SDK has (client.imageToVideo,
// textToVideo, videoToVideo, characterPerformance, videoUpscale).
var endpoints = map[string]bool{"image_to_video": true, "text_to_video": true, "video_to_video": true,
	"character_performance": true, "video_upscale": true}

// metaEndpoint is the metadata key of the create's endpoint.
const metaEndpoint = "runway_endpoint"

// Face is Runway's tasks API over Pollux.
type Face struct{ *face.Kit }

// New builds the face of mount m over p (a face.New).
func New(m face.Mount, p face.Pollux) face.Face {
	f := &Face{}
	f.Kit = face.NewKit(m, p, f)
	return f
}

// Handler serves the tasks API below the mount's prefix, every request
// first checked for its X-Runway-Version as Runway does.
func (f *Face) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/{endpoint}", face.Serve(f, f.create))
	mux.Handle("POST /v1/uploads", face.Serve(f, f.upload))
	mux.Handle("GET /v1/tasks/{id}", face.Serve(f, f.retrieve))
	mux.Handle("DELETE /v1/tasks/{id}", face.Serve(f, f.DeleteCancels("deleted through the Runway face")))
	mux.Handle("/", face.Serve(f, func(_ http.ResponseWriter, r *http.Request) error { return notFound(r) }))
	return face.Serve(f, func(w http.ResponseWriter, r *http.Request) error {
		switch v := r.Header.Get("X-Runway-Version"); v {
		case Version:
			mux.ServeHTTP(w, r)
			return nil
		case "":
			return &face.Error{Status: http.StatusBadRequest, Code: "missing_version", Field: "X-Runway-Version",
				Message: "You must provide an X-Runway-Version header: " + Version}
		default:
			return &face.Error{Status: http.StatusBadRequest, Code: "invalid_version", Field: "X-Runway-Version",
				Message: "The X-Runway-Version header " + v + " is not a supported API version: " + Version}
		}
	})
}

func notFound(r *http.Request) *face.Error {
	return &face.Error{Status: http.StatusNotFound, Code: "not_found", Message: "Not found: " + r.Method + " " + r.URL.Path}
}

// NotFound is the answer about a task the face may not see.
func (f *Face) NotFound(string) *face.Error {
	return &face.Error{Status: http.StatusNotFound, Code: "not_found", Message: "Task not found."}
}

// Mints reports whether id is a task id: a UUID.
func (f *Face) Mints(id string) bool { return face.IsUUID(id) }

// create submits a task: the body is the input as it is, endpoint:model
// the submission's model (as Pollux's Runway adapter reads it).
func (f *Face) create(w http.ResponseWriter, r *http.Request) error {
	endpoint := r.PathValue("endpoint")
	if !endpoints[endpoint] {
		return notFound(r)
	}
	key, err := face.IdempotencyKey(r)
	if err != nil {
		return err
	}
	body, err := face.ReadBody(w, r, maxBody)
	if err != nil {
		return err
	}
	var b struct {
		Model       any             `json:"model"`
		PromptImage json.RawMessage `json:"promptImage"`
		VideoURI    json.RawMessage `json:"videoUri"`
	}
	if err := face.DecodeObject(body, &b); err != nil {
		return err
	}
	model, ok := b.Model.(string)
	if !ok || model == "" || strings.ContainsAny(model, ": \t\n") {
		return &face.Error{Status: http.StatusBadRequest, Code: "invalid_field", Field: "model", Message: "model: required, a model name such as gen4_turbo"}
	}
	if err := checkInputs(b.PromptImage, b.VideoURI); err != nil {
		return err
	}
	if body, err = f.refs(w, r, body); err != nil {
		return err
	}
	id := face.UUID(face.IDBytes(r.Context(), face.Runway, f.Mount().Route, key, 16))
	m := events.Submit{V: events.Version, ID: id, IdempotencyKey: key, Model: endpoint + ":" + model, Input: body,
		Metadata: map[string]string{face.MetaFace: string(face.Runway), metaEndpoint: endpoint}}
	if _, err := f.Create(r, m); err != nil {
		return err
	}
	return face.WriteJSON(w, http.StatusOK, map[string]string{"id": id})
}

// checkInputs checks a create's input files, each a runwayUri the face
// gave (uploads.go), an https URL or a data: URI (checkURI):
// promptImage, one or a list of {uri, position}; videoUri, one.
func checkInputs(promptImage, videoURI json.RawMessage) error {
	if len(promptImage) > 0 {
		var one string
		var many []struct {
			URI      *string `json:"uri"`
			Position string  `json:"position"`
		}
		switch {
		case json.Unmarshal(promptImage, &one) == nil:
			if err := checkURI("promptImage", one); err != nil {
				return err
			}
		case json.Unmarshal(promptImage, &many) == nil && len(many) > 0:
			for i, p := range many {
				field := "promptImage." + strconv.Itoa(i) + ".uri"
				if p.URI == nil {
					return &face.Error{Status: http.StatusBadRequest, Code: "invalid_field", Field: field, Message: field + ": required"}
				}
				if err := checkURI(field, *p.URI); err != nil {
					return err
				}
			}
		default:
			return &face.Error{Status: http.StatusBadRequest, Code: "invalid_field", Field: "promptImage",
				Message: "promptImage: an https URL or data: URI, or a list of {uri, position}"}
		}
	}
	if len(videoURI) > 0 {
		var u string
		if json.Unmarshal(videoURI, &u) != nil {
			return &face.Error{Status: http.StatusBadRequest, Code: "invalid_field", Field: "videoUri", Message: "videoUri: an https URL or a data: URI"}
		}
		return checkURI("videoUri", u)
	}
	return nil
}

// checkURI checks one input file's URI at field: a runwayUri the face
// gave, else as face.CheckInputURL checks a URL.
func checkURI(field, s string) error {
	if _, ok := fileOf(s); ok {
		return nil // its file's owner is checked once it is a reference
	}
	return face.CheckInputURL(field, s)
}

// task is Runway's task, as the SDK and waitForTaskOutput read it.
type task struct {
	ID          string   `json:"id"`
	Status      string   `json:"status"`
	CreatedAt   string   `json:"createdAt"`
	Progress    *float64 `json:"progress,omitempty"`
	Output      []string `json:"output,omitempty"`
	Failure     string   `json:"failure,omitempty"`
	FailureCode string   `json:"failureCode,omitempty"`
}

// failureCodes are the failureCode of a job that ended without output.
var failureCodes = map[state.State]string{state.Failed: "INTERNAL", state.Expired: "INTERNAL.TIMEOUT", state.Lost: "INTERNAL.LOST"}

// taskOf is job j as a task for request r.
func (f *Face) taskOf(r *http.Request, j *state.Job) task {
	t := task{ID: j.ID, CreatedAt: j.CreatedAt.UTC().Format(time.RFC3339Nano)}
	switch j.State {
	case state.Pending, state.Queued:
		t.Status = "PENDING"
		if j.ProviderStatus == "THROTTLED" {
			t.Status = "THROTTLED"
		}
	case state.Running:
		p := 0.0
		if j.Progress != nil && !math.IsNaN(*j.Progress) {
			p = min(max(*j.Progress, 0), 1)
		}
		t.Status, t.Progress = "RUNNING", &p
	case state.Succeeded:
		t.Status, t.Output = "SUCCEEDED", f.OutputURLs(r, j)
		if t.Output == nil {
			t.Output = []string{}
		}
	case state.Canceled:
		t.Status = "CANCELLED"
	default:
		t.Status, t.FailureCode, t.Failure = "FAILED", failureCodes[j.State], j.Reason
		if t.Failure == "" {
			t.Failure = "The task ended " + string(j.State) + "."
		}
	}
	return t
}

// retrieve answers a task from its job's record (face.Kit.Poll).
func (f *Face) retrieve(w http.ResponseWriter, r *http.Request) error {
	j, err := f.Poll(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	return face.WriteJSON(w, http.StatusOK, f.taskOf(r, j))
}

// issue is one problem of a 400, as Runway's validation errors list them.
type issue struct {
	Path    []string `json:"path"`
	Message string   `json:"message"`
}

// WriteError writes e as Runway does: {"error": message}, a field at
// fault in issues.
func (f *Face) WriteError(w http.ResponseWriter, e *face.Error) {
	e.SetHeaders(w.Header())
	body := struct {
		Error  string  `json:"error"`
		Issues []issue `json:"issues,omitempty"`
	}{Error: e.Message}
	if e.Status == http.StatusUnauthorized {
		body.Error = "Incorrect API key: the key must be a Pollux token of the front door's tokens file."
	}
	if body.Error == "" {
		body.Error = http.StatusText(e.Status)
	}
	if e.Field != "" {
		body.Issues = []issue{{Path: strings.Split(e.Field, "."), Message: e.Message}}
	}
	_ = face.WriteJSON(w, e.Status, body) // always encodes
}
