package fal

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/pollux-dev/pollux/internal/core/faceshape"
	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// MetaApp is the metadata key a submit writes on its job (besides
// face.MetaFace) for the app id the request's status, result and cancel
// URLs name.
const MetaApp = faceshape.MetaFalApp

// Face is fal's queue API, served through the fal client's proxy
// protocol for one route.
type Face struct {
	*face.Kit
}

// New is the fal face of a mount over Pollux (a face.New).
func New(m face.Mount, p face.Pollux) face.Face {
	f := &Face{}
	f.Kit = face.NewKit(m, p, f)
	return f
}

// Handler serves the proxy endpoint — any request to the mount's "/",
// dispatched on its x-fal-target-url — and the outputs Pollux keeps
// (face.OutputPath), which a result links to.
func (f *Face) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", face.Serve(f, f.serve))
	mux.Handle("GET "+face.OutputPath, face.Serve(f, f.ServeOutput))
	mux.Handle("GET "+filesPath+"{id}", face.Serve(f, f.serveFile))
	return mux
}

// NotFound is the answer about a request the face may not see.
func (f *Face) NotFound(id string) *face.Error {
	return &face.Error{Status: http.StatusNotFound, Code: "not_found", Message: "no request " + id}
}

// Mints reports whether id is a request id the face makes: a UUID.
func (f *Face) Mints(id string) bool { return uuidRe.MatchString(id) }

func (f *Face) serve(w http.ResponseWriter, r *http.Request) error {
	if r.URL.Path != "/" {
		return &face.Error{Status: http.StatusNotFound, Code: "not_found",
			Message: "the fal proxy is " + f.Mount().Prefix + "/ (the fal client's proxyUrl)"}
	}
	t, e := parseTarget(r.Header.Get(TargetHeader), r.Method)
	if e != nil {
		return e
	}
	if t.id != "" {
		w.Header().Set(requestIDHeader, t.id) // the client reads it from every answer about a request
	}
	switch t.op {
	case opStatus:
		return f.status(w, r, t)
	case opResult:
		return f.result(w, r, t)
	case opCancel:
		return f.cancel(w, r, t)
	case opUpload:
		return f.initiate(w, r)
	case opStatusStream:
		return f.statusStream(w, r, t)
	default:
		return f.submit(w, r, t)
	}
}

// submit makes a Pollux submission of the target's endpoint id (the
// model) with the body as its input, and answers as fal's queue does.
func (f *Face) submit(w http.ResponseWriter, r *http.Request, t target) error {
	md := map[string]string{face.MetaFace: string(face.Fal), MetaApp: t.app}
	hook, err := f.webhook(r, t.webhooks, md) // checked before anything is stored
	if err != nil {
		return err
	}
	key, err := face.IdempotencyKey(r)
	if err != nil {
		return err
	}
	input, err := readInput(w, r)
	if err != nil {
		return err
	}
	if input, err = f.InputRefs(w, r, input, "body", filesPath); err != nil {
		return err
	}
	id := uuid(face.IDBytes(r.Context(), face.Fal, f.Mount().Route, key, 16))
	err = f.Submit(r, events.Submit{
		V: events.Version, ID: id, IdempotencyKey: key, Model: t.endpoint, Input: input, Metadata: md, NotifyURL: hook,
	})
	var fe *events.FieldError
	switch e := (*face.Error)(nil); {
	case err == nil:
	case !errors.As(err, &e) && errors.As(err, &fe):
		return &face.Error{Status: http.StatusBadRequest, Code: "invalid_field", Field: fe.Field, Message: fe.Error(), Err: err}
	default:
		return err
	}
	w.Header().Set(requestIDHeader, id)
	s := submitted{
		RequestID: id, ResponseURL: queueURL(t.app, id, ""), StatusURL: queueURL(t.app, id, "/status"),
		CancelURL: queueURL(t.app, id, "/cancel"), Status: inQueue,
	}
	if hook != "" {
		s.GatewayRequestID = id // fal answers a webhook submit with it; its deliveries carry it
	}
	return face.WriteJSON(w, http.StatusOK, s)
}

// readInput reads a submit's body: a JSON object of at most
// face.MaxDataBody ({} when the client sent none): files it carries as
// data: URIs are taken out (inputRefs), and the submission is bounded.
func readInput(w http.ResponseWriter, r *http.Request) (json.RawMessage, error) {
	body, err := face.ReadBody(w, r, face.MaxDataBody)
	if err != nil {
		return nil, err
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

// job is the target's request as look finds it (face.Kit.Job, or Poll
// for a status: either decides whether the face may see it), which must
// be of the app the target's URL names: a request id under another app's
// URL is the same 404 as an unknown one.
func (f *Face) job(r *http.Request, t target, look func(*http.Request, string) (*state.Job, error)) (*state.Job, error) {
	j, err := look(r, t.id)
	if err != nil {
		return nil, err
	}
	if j.Metadata[MetaApp] != t.app {
		e := f.NotFound(t.id)
		e.Err = state.ErrNotFound
		return nil, e
	}
	return j, nil
}

// status answers the request's status from its job's record (or, through
// an outage, from what this process last knew of it: face.Kit.Poll).
func (f *Face) status(w http.ResponseWriter, r *http.Request, t target) error {
	j, err := f.job(r, t, f.Poll)
	if err != nil {
		return err
	}
	s, code := statusOf(j, t.app, t.logs)
	return face.WriteJSON(w, code, s)
}

// result answers a succeeded job's outputs, and an ended job's failure as
// fal's error; a job still under way is a 400.
func (f *Face) result(w http.ResponseWriter, r *http.Request, t target) error {
	j, err := f.job(r, t, f.Job)
	if err != nil {
		return err
	}
	if !j.State.Terminal() {
		s, _ := statusOf(j, t.app, false)
		return &face.Error{Status: http.StatusBadRequest, Code: "not_completed",
			Message: "request " + j.ID + " is " + s.Status + ": its result is ready once its status is COMPLETED"}
	}
	if fe := failureOf(j); fe != nil {
		return fe
	}
	return face.WriteJSON(w, http.StatusOK, faceshape.FalResultOf(j, func(n int) (string, bool) { return f.OutputURL(r, j, n) }))
}

// cancel asks Pollux to cancel the job: CANCELLATION_REQUESTED (202) —
// Pollux cancels at the provider and the status says the outcome — or
// fal's 400 ALREADY_COMPLETED once it has ended, 404 NOT_FOUND for a
// request the face may not see.
func (f *Face) cancel(w http.ResponseWriter, r *http.Request, t target) error {
	j, err := f.job(r, t, f.Job)
	if e := (*face.Error)(nil); errors.Is(err, state.ErrNotFound) && errors.As(err, &e) {
		return face.WriteJSON(w, e.Status, faceshape.FalError{Status: "NOT_FOUND", Detail: e.Message, Message: e.Message})
	}
	if err != nil {
		return err
	}
	err = face.ErrTerminal
	if !j.State.Terminal() {
		err = f.Cancel(r, j, "canceled through the fal face")
	}
	switch {
	case errors.Is(err, face.ErrTerminal):
		msg := "request " + j.ID + " has already completed"
		return face.WriteJSON(w, http.StatusBadRequest, faceshape.FalError{Status: "ALREADY_COMPLETED", Detail: msg, Message: msg})
	case err != nil:
		return err
	}
	return face.WriteJSON(w, http.StatusAccepted, faceshape.FalError{Status: "CANCELLATION_REQUESTED"})
}
