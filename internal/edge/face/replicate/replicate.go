package replicate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Limits and waits of the face.
const (
	// MaxWait is the longest a create with Prefer: wait holds its answer
	// (Replicate's 60 s; also what a bare "wait" asks for). A longer
	// wait=n is held 60 s.
	MaxWait = 60 * time.Second
	// RecordWait bounds how long a create waits for its job's record
	// (ingest takes a submission within milliseconds), so a get that
	// follows the answer finds the prediction. A create answered before
	// its record existed is answered "starting" by a get of this process
	// until the record exists (face.PendingTTL).
	RecordWait = 5 * time.Second
	// CancelWait bounds how long a cancel waits for the job to end, so
	// its answer says canceled when the cancel lands at once.
	CancelWait = 2 * time.Second
	// writeSlack is added to a held answer's write deadline.
	writeSlack = 10 * time.Second
)

// Face is the Replicate face of one route.
type Face struct {
	*face.Kit
	recordWait time.Duration
}

// New builds the Replicate face of mount m over Pollux p.
func New(m face.Mount, p face.Pollux) face.Face {
	f := &Face{recordWait: RecordWait}
	f.Kit = face.NewKit(m, p, f)
	return f
}

// Handler serves Replicate's predictions endpoints below the mount's
// prefix; any other path is answered 404 in Replicate's shape.
func (f *Face) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/predictions", face.Serve(f, func(w http.ResponseWriter, r *http.Request) error { return f.create(w, r, "") }))
	mux.Handle("POST /v1/models/{owner}/{name}/predictions", face.Serve(f, func(w http.ResponseWriter, r *http.Request) error {
		owner, name := r.PathValue("owner"), r.PathValue("name")
		if !modelPart.MatchString(owner) || !modelPart.MatchString(name) {
			return notFound(fmt.Sprintf("no model %s/%s: a model is owner/name, each 1-100 characters of [A-Za-z0-9_.-]", owner, name))
		}
		return f.create(w, r, owner+"/"+name)
	}))
	mux.Handle("GET /v1/predictions", face.Serve(f, f.list))
	mux.Handle("GET /v1/predictions/{id}", face.Serve(f, f.get))
	mux.Handle("POST /v1/predictions/{id}/cancel", face.Serve(f, f.cancel))
	mux.Handle("POST /v1/files", face.Serve(f, f.createFile))
	mux.Handle("GET /v1/files", face.Serve(f, f.listFiles))
	mux.Handle("GET /v1/files/{id}", face.Serve(f, f.getFile))
	mux.Handle("GET /v1/files/{id}/download", face.Serve(f, f.downloadFile))
	mux.Handle("DELETE /v1/files/{id}", face.Serve(f, f.deleteFile))
	mux.Handle("GET /v1/webhooks/default/secret", face.Serve(f, f.webhookSecret))
	mux.Handle("GET "+face.OutputPath, face.Serve(f, f.ServeOutput))
	mux.Handle("/", face.Serve(f, func(_ http.ResponseWriter, r *http.Request) error {
		return notFound("Pollux's Replicate face serves creating, getting, listing and canceling predictions, the files API and the webhook secret; " + r.Method + " " + r.URL.Path + " is not among them")
	}))
	return mux
}

// NotFound is the answer about a prediction the face may not see.
func (f *Face) NotFound(id string) *face.Error { return notFound("no prediction " + id) }

// Mints accepts any job id: the face's are 26 characters of lowercase
// base32, and a prediction of any other id is not one it made.
func (f *Face) Mints(id string) bool { return events.ValidToken(id) }

var modelPart = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)

// createBody is what a create's body may say.
type createBody struct {
	Version             *string         `json:"version"`
	Input               json.RawMessage `json:"input"`
	Webhook             string          `json:"webhook"`
	WebhookEventsFilter []string        `json:"webhook_events_filter"`
}

// create submits a prediction of model (the path's) or of the body's
// version, then answers once its record exists — or, with Prefer: wait,
// once it has ended or the wait is over.
func (f *Face) create(w http.ResponseWriter, r *http.Request, model string) error {
	start := time.Now()
	key, err := face.IdempotencyKey(r)
	if err != nil {
		return err
	}
	hold, err := preferWait(r.Header.Values("Prefer"))
	if err != nil {
		return err
	}
	body, err := face.ReadBody(w, r, face.MaxDataBody)
	if err != nil {
		return err
	}
	m, err := submission(body, model, key, newID(r.Context(), f.Mount().Route, key), func(in json.RawMessage) (json.RawMessage, error) {
		return f.InputRefs(w, r, in, "input", filesPath)
	}, hookTarget{Webhooks: f.Webhooks(r), base: f.Base(r)})
	if err != nil {
		return err
	}
	if err := f.Submit(r, m); err != nil {
		if e := (*face.Error)(nil); errors.As(err, &e) && e.Status == http.StatusBadRequest {
			return invalid(e.Field, e.Message) // what the check above let through
		}
		return err
	}
	if hold > 0 {
		_ = http.NewResponseController(w).SetWriteDeadline(start.Add(hold + writeSlack))
	}
	j, err := f.Created(r.Context(), m, start.Add(max(f.recordWait, hold)))
	if err != nil {
		return err
	}
	if hold > 0 {
		j = f.Ended(r.Context(), j, start.Add(hold))
	}
	p := f.prediction(r, j, m.Input)
	if !j.State.Terminal() {
		// run() polls only a create answered "starting": any other
		// unfinished status would end it with a null output.
		p.Status = statusStarting
	}
	return face.WriteJSON(w, http.StatusCreated, p)
}

// submission checks a create's body and makes the job's submission.
// refs turns the files the input carries into references (inputRefs);
// hooks says whether and how its webhook may be called.
func submission(body []byte, model, key, id string, refs func(json.RawMessage) (json.RawMessage, error), hooks hookTarget) (events.Submit, error) {
	var b createBody
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return events.Submit{}, badRequest("", "the body must be a JSON object")
	}
	if err := json.Unmarshal(body, &b); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return events.Submit{}, invalid(te.Field, fmt.Sprintf("%s: must not be a JSON %s", te.Field, te.Value))
		}
		return events.Submit{}, badRequest("", "the body is not valid JSON: "+err.Error())
	}
	md := map[string]string{face.MetaFace: string(face.Replicate)}
	modelField := "version"
	switch {
	case model != "":
		md[metaModel], modelField = model, "model"
	case b.Version == nil || strings.TrimSpace(*b.Version) == "":
		return events.Submit{}, invalid("version", "version: required (or create through /v1/models/{owner}/{name}/predictions)")
	default:
		model = *b.Version
		md[metaVersion] = model
	}
	if in := bytes.TrimSpace(b.Input); len(in) == 0 || in[0] != '{' {
		return events.Submit{}, invalid("input", "input: required, a JSON object of the model's inputs")
	}
	notifyURL, err := hooks.webhook(b.Webhook, b.WebhookEventsFilter, md)
	if err != nil {
		return events.Submit{}, err
	}
	input, err := refs(b.Input)
	if err != nil {
		return events.Submit{}, err
	}
	b.Input = input
	m := events.Submit{V: events.Version, ID: id, IdempotencyKey: key, Model: model, Input: b.Input, Metadata: md, NotifyURL: notifyURL}
	// Check as the front door will, so a refusal names this API's field.
	data, err := json.Marshal(m)
	if err == nil {
		_, err = events.DecodeSubmit(data)
	}
	if err != nil {
		var fe *events.FieldError
		field := ""
		if errors.As(err, &fe) {
			field = fe.Field
		}
		if field == "model" {
			field = modelField
		}
		return events.Submit{}, invalid(field, err.Error())
	}
	return m, nil
}

// preferWait reads the Prefer header's wait preference: 0 without one,
// MaxWait for a bare "wait", n seconds (at most MaxWait) for "wait=n".
func preferWait(values []string) (time.Duration, error) {
	for _, v := range values {
		for pref := range strings.SplitSeq(v, ",") {
			name, val, hasVal := strings.Cut(strings.TrimSpace(pref), "=")
			if !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			if !hasVal {
				return MaxWait, nil
			}
			n, err := strconv.Atoi(strings.Trim(strings.TrimSpace(val), `"`))
			if err != nil || n < 1 {
				return 0, badRequest("Prefer", "Prefer: wait=n takes a whole number of seconds from 1 to 60")
			}
			return min(time.Duration(n)*time.Second, MaxWait), nil
		}
	}
	return 0, nil
}

// get answers a prediction from its job's record (or, through an outage,
// from what this process last knew of it: face.Kit.Poll).
func (f *Face) get(w http.ResponseWriter, r *http.Request) error {
	j, err := f.Poll(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	return face.WriteJSON(w, http.StatusOK, f.prediction(r, j, nil))
}

// prediction is job j as a prediction for request r (predictionOf).
func (f *Face) prediction(r *http.Request, j *state.Job, input json.RawMessage) prediction {
	p := predictionOf(j, f.Base(r), input, f.OutputURLs(r, j))
	p.Input = f.ShowRefs(r, p.Input, filesPath) // the files' urls.get, as the app sent them
	return p
}

// predictionList is Replicate's page of predictions.
type predictionList struct {
	Previous *string      `json:"previous"`
	Next     *string      `json:"next"`
	Results  []prediction `json:"results"`
}

// list answers GET /v1/predictions: the predictions this face made on
// its route, newest first, face.MaxList a page; next is the URL of the
// page after (its cursor the last prediction's id), which the SDK's
// paginate() follows. Pollux names no previous page.
func (f *Face) list(w http.ResponseWriter, r *http.Request) error {
	cursor := r.URL.Query().Get("cursor")
	jobs, more, err := f.List(r, cursor, face.MaxList)
	switch {
	case errors.Is(err, face.ErrNoSuchJob):
		return &face.Error{Status: http.StatusBadRequest, Code: "invalid_cursor", Field: "cursor",
			Message: "cursor names no prediction of this list: " + strconv.Quote(cursor) + "; start again without it"}
	case err != nil:
		return err
	}
	page := predictionList{Results: make([]prediction, 0, len(jobs))}
	for _, j := range jobs {
		page.Results = append(page.Results, f.prediction(r, j, nil))
	}
	if more && len(jobs) > 0 {
		next := f.Base(r) + "/v1/predictions?cursor=" + url.QueryEscape(jobs[len(jobs)-1].ID)
		page.Next = &next
	}
	return face.WriteJSON(w, http.StatusOK, page)
}

// cancel asks for a prediction's cancel and answers it as it stands once
// the cancel has landed or CancelWait has passed; a prediction that has
// ended is answered as it is.
func (f *Face) cancel(w http.ResponseWriter, r *http.Request) error {
	j, err := f.Job(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	switch err := f.Cancel(r, j, "canceled through the Replicate face"); {
	case errors.Is(err, face.ErrTerminal):
	case err != nil:
		return err
	default:
		j = f.Ended(r.Context(), j, time.Now().Add(CancelWait))
	}
	return face.WriteJSON(w, http.StatusOK, f.prediction(r, j, nil))
}
