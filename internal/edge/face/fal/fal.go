package fal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Metadata a submit puts on its job: the face, and the app id the
// request's status, result and cancel URLs name.
const (
	MetaFace = "face"
	MetaApp  = "fal_app"
)

// Face is fal's queue API, served through the fal client's proxy
// protocol for one route.
type Face struct {
	m face.Mount
	p face.Pollux
}

// New is the fal face of a mount over Pollux (a face.New).
func New(m face.Mount, p face.Pollux) face.Face {
	return &Face{m: m, p: p}
}

// Handler serves the proxy endpoint: any request to the mount's "/",
// dispatched on its x-fal-target-url.
func (f *Face) Handler() http.Handler { return http.HandlerFunc(f.serve) }

// WriteError writes e in fal's error shape.
func (f *Face) WriteError(w http.ResponseWriter, e face.Error) { writeError(w, e, "") }

func (f *Face) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		f.WriteError(w, face.Error{Status: http.StatusNotFound, Code: "not_found",
			Message: "the fal proxy is " + f.m.Prefix + "/ (the fal client's proxyUrl)"})
		return
	}
	t, e := parseTarget(r.Header.Get(TargetHeader), r.Method)
	if e != nil {
		f.WriteError(w, *e)
		return
	}
	switch t.op {
	case opSubmit:
		f.submit(w, r, t)
	case opStatus:
		f.status(w, r, t)
	case opResult:
		f.result(w, r, t)
	case opCancel:
		f.cancel(w, r, t)
	}
}

// submit makes a Pollux submission of the target's endpoint id (the
// model) with the body as its input, and answers as fal's queue does.
func (f *Face) submit(w http.ResponseWriter, r *http.Request, t target) {
	if t.webhook {
		f.WriteError(w, face.Error{Status: http.StatusUnprocessableEntity, Code: "invalid_parameter", Field: "fal_webhook",
			Message: "fal_webhook: Pollux calls no fal-shaped webhooks; poll the status (fal.subscribe), or submit to Pollux's own API with a notify_url"})
		return
	}
	key, e := face.IdempotencyKey(r)
	if e != nil {
		f.WriteError(w, *e)
		return
	}
	input, e := readInput(w, r)
	if e != nil {
		f.WriteError(w, *e)
		return
	}
	id := uuid(face.IDBytes(face.Fal, f.m.Route, key, 16))
	err := f.p.Submit(r.Context(), r, f.m.Route, events.Submit{
		V: events.Version, ID: id, IdempotencyKey: key, Model: t.endpoint, Input: input,
		Metadata: map[string]string{MetaFace: string(face.Fal), MetaApp: t.app},
	})
	if err != nil {
		f.fail(w, err, "")
		return
	}
	w.Header().Set(requestIDHeader, id)
	writeJSON(w, http.StatusOK, submitted{
		RequestID: id, ResponseURL: queueURL(t.app, id, ""), StatusURL: queueURL(t.app, id, "/status"),
		CancelURL: queueURL(t.app, id, "/cancel"), Status: inQueue,
	})
}

// readInput reads a submit's body: a JSON object of at most
// events.MaxMessageBytes ({} when the client sent none).
func readInput(w http.ResponseWriter, r *http.Request) (json.RawMessage, *face.Error) {
	body, e := face.ReadBody(w, r, events.MaxMessageBytes)
	if e != nil {
		return nil, e
	}
	body = bytes.TrimSpace(body)
	switch {
	case len(body) == 0:
		return json.RawMessage(`{}`), nil
	case body[0] != '{' || !json.Valid(body):
		return nil, &face.Error{Status: http.StatusUnprocessableEntity, Code: "invalid_body", Field: "body",
			Message: "the input must be a JSON object"}
	}
	return body, nil
}

// job reads the record of the target's request: one this face created on
// its route for the target's app, else 404. A record not there yet is
// waited for a moment (face.Mount.Record).
func (f *Face) job(ctx context.Context, t target) (*state.Job, *face.Error) {
	missing := &face.Error{Status: http.StatusNotFound, Code: "not_found", Message: "no request " + t.id + " of " + t.app}
	if !uuidRe.MatchString(t.id) {
		return nil, missing
	}
	j, err := f.m.Record(ctx, f.p, t.id)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return nil, missing
	case err != nil:
		if fe, ok := f.errorOf(err); ok {
			return nil, &fe
		}
		f.m.Logger.Warn().Err(err).Str("job_id", t.id).Msg("reading a fal request failed")
		return nil, &face.Error{Status: http.StatusServiceUnavailable, Code: "unavailable",
			Message: "reading the request failed; retry later", RetryAfter: time.Second}
	case j == nil || j.Metadata[MetaFace] != string(face.Fal) || j.Metadata[MetaApp] != t.app || !f.onRoute(j):
		return nil, missing
	}
	return j, nil
}

// onRoute reports whether job j was submitted to the face's route
// (directly, or through it as a model route).
func (f *Face) onRoute(j *state.Job) bool {
	return j.Route == f.m.Route || j.Routing != nil && j.Routing.Via == f.m.Route
}

func (f *Face) status(w http.ResponseWriter, r *http.Request, t target) {
	j, e := f.job(r.Context(), t)
	if e != nil {
		writeError(w, *e, t.id)
		return
	}
	s, code := statusOf(j, t.app, t.logs)
	w.Header().Set(requestIDHeader, j.ID)
	writeJSON(w, code, s)
}

// result answers a succeeded job's outputs, and an ended job's failure as
// fal's error; a job still under way is a 400.
func (f *Face) result(w http.ResponseWriter, r *http.Request, t target) {
	j, e := f.job(r.Context(), t)
	if e != nil {
		writeError(w, *e, t.id)
		return
	}
	if !j.State.Terminal() {
		s, _ := statusOf(j, t.app, false)
		writeError(w, face.Error{Status: http.StatusBadRequest, Code: "not_completed",
			Message: "request " + j.ID + " is " + s.Status + ": its result is ready once its status is COMPLETED"}, j.ID)
		return
	}
	if fe := failureOf(j); fe != nil {
		writeError(w, *fe, j.ID)
		return
	}
	w.Header().Set(requestIDHeader, j.ID)
	writeJSON(w, http.StatusOK, resultOf(j))
}

// cancel asks Pollux to cancel the job: CANCELLATION_REQUESTED (202) —
// Pollux cancels at the provider and the status says the outcome — or
// fal's 400 ALREADY_COMPLETED once it has ended.
func (f *Face) cancel(w http.ResponseWriter, r *http.Request, t target) {
	j, e := f.job(r.Context(), t)
	if e != nil {
		w.Header().Set(requestIDHeader, t.id)
		msg := e.Message
		writeJSON(w, e.Status, errorBody{Status: "NOT_FOUND", Detail: msg, Message: msg})
		return
	}
	err := face.ErrTerminal
	if !j.State.Terminal() {
		err = f.p.Cancel(r.Context(), r, j, "canceled through the fal face")
	}
	switch {
	case errors.Is(err, face.ErrTerminal):
		msg := "request " + j.ID + " has already completed"
		w.Header().Set(requestIDHeader, j.ID)
		writeJSON(w, http.StatusBadRequest, errorBody{Status: "ALREADY_COMPLETED", Detail: msg, Message: msg})
	case err != nil:
		f.fail(w, err, j.ID)
	default:
		w.Header().Set(requestIDHeader, j.ID)
		writeJSON(w, http.StatusAccepted, errorBody{Status: "CANCELLATION_REQUESTED"})
	}
}

// errorOf is the face.Error of an error a Pollux method returned.
func (f *Face) errorOf(err error) (face.Error, bool) { return face.AsError(err) }

// fail writes an error a Pollux method returned.
func (f *Face) fail(w http.ResponseWriter, err error, requestID string) {
	var fe *events.FieldError
	switch e, ok := f.errorOf(err); {
	case ok:
		writeError(w, e, requestID)
	case errors.As(err, &fe):
		writeError(w, face.Error{Status: http.StatusBadRequest, Code: "invalid_field", Field: fe.Field, Message: fe.Error()}, requestID)
	default:
		f.m.Logger.Warn().Err(err).Msg("a fal request failed")
		writeError(w, face.Error{Status: http.StatusServiceUnavailable, Code: "unavailable",
			Message: "Pollux could not take the request; retry later", RetryAfter: time.Second}, requestID)
	}
}
