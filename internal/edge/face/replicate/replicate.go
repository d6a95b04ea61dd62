package replicate

import (
	"bytes"
	"context"
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
	// MaxBody bounds a create's body: the largest intake message.
	MaxBody = events.MaxMessageBytes
	// MaxWait is the longest a create with Prefer: wait holds its answer
	// (Replicate's 60 s; also what a bare "wait" asks for). A longer
	// wait=n is held 60 s.
	MaxWait = 60 * time.Second
	// RecordWait bounds how long a create waits for its job's record
	// (ingest takes a submission within milliseconds), so a get that
	// follows the answer finds the prediction.
	RecordWait = 5 * time.Second
	// CancelWait bounds how long a cancel waits for the job to end, so
	// its answer says canceled when the cancel lands at once.
	CancelWait = 2 * time.Second
	// PendingTTL is how long a create answered before its record existed
	// is answered "starting" by a get of this process while the record
	// is still missing (a gateway that died holding the submission hands
	// it on after the streams' intake_ack_wait, 60 s by default).
	PendingTTL = 2 * time.Minute
	// maxPending bounds those creates.
	maxPending = 10000
	// writeSlack is added to a held answer's write deadline.
	writeSlack = 10 * time.Second
)

// Face is the Replicate face of one route.
type Face struct {
	m          face.Mount
	p          face.Pollux
	recordWait time.Duration
	pending    pending
}

// New builds the Replicate face of mount m over Pollux p.
func New(m face.Mount, p face.Pollux) face.Face {
	return &Face{m: m, p: p, recordWait: RecordWait, pending: pending{by: map[string]*state.Job{}}}
}

// Handler serves Replicate's predictions endpoints below the mount's
// prefix; any other path is answered 404 in Replicate's shape.
func (f *Face) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/predictions", func(w http.ResponseWriter, r *http.Request) { f.create(w, r, "") })
	mux.HandleFunc("POST /v1/models/{owner}/{name}/predictions", func(w http.ResponseWriter, r *http.Request) {
		owner, name := r.PathValue("owner"), r.PathValue("name")
		if !modelPart.MatchString(owner) || !modelPart.MatchString(name) {
			f.WriteError(w, notFound(fmt.Sprintf("no model %s/%s: a model is owner/name, each 1-100 characters of [A-Za-z0-9_.-]", owner, name)))
			return
		}
		f.create(w, r, owner+"/"+name)
	})
	mux.HandleFunc("GET /v1/predictions", f.list)
	mux.HandleFunc("GET /v1/predictions/{id}", f.get)
	mux.HandleFunc("POST /v1/predictions/{id}/cancel", f.cancel)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		f.WriteError(w, notFound("Pollux's Replicate face serves creating, getting, listing and canceling predictions; "+r.Method+" "+r.URL.Path+" is not among them"))
	})
	return mux
}

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
func (f *Face) create(w http.ResponseWriter, r *http.Request, model string) {
	start := time.Now()
	key, fe := face.IdempotencyKey(r)
	if fe != nil {
		f.WriteError(w, *fe)
		return
	}
	hold, fe := preferWait(r.Header.Values("Prefer"))
	if fe != nil {
		f.WriteError(w, *fe)
		return
	}
	body, fe := face.ReadBody(w, r, MaxBody)
	if fe != nil {
		f.WriteError(w, *fe)
		return
	}
	m, fe := submission(body, model, key, newID(f.m.Route, key))
	if fe != nil {
		f.WriteError(w, *fe)
		return
	}
	if err := f.p.Submit(r.Context(), r, f.m.Route, m); err != nil {
		if e, ok := face.AsError(err); ok && e.Status == http.StatusBadRequest {
			f.WriteError(w, invalid(e.Field, e.Message)) // what the check above let through
			return
		}
		f.m.Logger.Warn().Err(err).Str("job_id", m.ID).Msg("publishing a prediction failed")
		f.WriteError(w, unavailable("publishing the prediction"))
		return
	}
	if hold > 0 {
		_ = http.NewResponseController(w).SetWriteDeadline(start.Add(hold + writeSlack))
	}
	j := f.await(r.Context(), m.ID, start, hold)
	if j == nil {
		// Not taken yet: the submission will be; answer from the create,
		// and so answer a get until the record exists.
		j = &state.Job{ID: m.ID, Route: f.m.Route, Model: m.Model, State: state.Pending, CreatedAt: start, Metadata: m.Metadata, Input: m.Input}
		f.pending.add(j, f.m.Clock())
	}
	p := predictionOf(j, f.base(r), m.Input)
	if !j.State.Terminal() {
		// run() polls only a create answered "starting": any other
		// unfinished status would end it with a null output.
		p.Status = statusStarting
	}
	writeJSON(w, http.StatusCreated, p)
}

// await returns job id's record once it exists (waiting at most
// RecordWait), and, when hold is set, once it has ended or hold has passed
// since start; nil when there is no record yet.
func (f *Face) await(ctx context.Context, id string, start time.Time, hold time.Duration) *state.Job {
	rctx, cancel := context.WithDeadline(ctx, start.Add(max(f.recordWait, hold)))
	defer cancel()
	j, err := f.p.Wait(rctx, id, func(*state.Job) bool { return true })
	if err != nil {
		return nil
	}
	if hold == 0 || j.State.Terminal() {
		return j
	}
	hctx, cancel := context.WithDeadline(ctx, start.Add(hold))
	defer cancel()
	if last, err := f.p.Wait(hctx, id, func(j *state.Job) bool { return j.State.Terminal() }); err == nil {
		j = last
	}
	return j
}

// submission checks a create's body and makes the job's submission.
func submission(body []byte, model, key, id string) (events.Submit, *face.Error) {
	var b createBody
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		e := badRequest("", "the body must be a JSON object")
		return events.Submit{}, &e
	}
	if err := json.Unmarshal(body, &b); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			e := invalid(te.Field, fmt.Sprintf("%s: must not be a JSON %s", te.Field, te.Value))
			return events.Submit{}, &e
		}
		e := badRequest("", "the body is not valid JSON: "+err.Error())
		return events.Submit{}, &e
	}
	md := map[string]string{metaFace: string(face.Replicate)}
	modelField := "version"
	switch {
	case model != "":
		md[metaModel], modelField = model, "model"
	case b.Version == nil || strings.TrimSpace(*b.Version) == "":
		e := invalid("version", "version: required (or create through /v1/models/{owner}/{name}/predictions)")
		return events.Submit{}, &e
	default:
		model = *b.Version
		md[metaVersion] = model
	}
	if in := bytes.TrimSpace(b.Input); len(in) == 0 || in[0] != '{' {
		e := invalid("input", "input: required, a JSON object of the model's inputs")
		return events.Submit{}, &e
	}
	if b.Webhook != "" || len(b.WebhookEventsFilter) > 0 {
		e := invalid("webhook", "webhook: Pollux's Replicate face sends no webhooks; follow the prediction with get (or Pollux's own events)")
		return events.Submit{}, &e
	}
	m := events.Submit{V: events.Version, ID: id, IdempotencyKey: key, Model: model, Input: b.Input, Metadata: md}
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
		e := invalid(field, err.Error())
		return events.Submit{}, &e
	}
	return m, nil
}

// preferWait reads the Prefer header's wait preference: 0 without one,
// MaxWait for a bare "wait", n seconds (at most MaxWait) for "wait=n".
func preferWait(values []string) (time.Duration, *face.Error) {
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
				e := badRequest("Prefer", "Prefer: wait=n takes a whole number of seconds from 1 to 60")
				return 0, &e
			}
			return min(time.Duration(n)*time.Second, MaxWait), nil
		}
	}
	return 0, nil
}

// get answers a prediction from its job's record.
func (f *Face) get(w http.ResponseWriter, r *http.Request) {
	j, fe := f.job(r)
	if fe != nil {
		f.WriteError(w, *fe)
		return
	}
	writeJSON(w, http.StatusOK, predictionOf(j, f.base(r), nil))
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
func (f *Face) list(w http.ResponseWriter, r *http.Request) {
	cursor := r.URL.Query().Get("cursor")
	jobs, more, err := f.p.List(r.Context(), face.Replicate, f.m.Route, cursor, face.MaxList)
	switch {
	case errors.Is(err, face.ErrNoSuchJob):
		f.WriteError(w, face.Error{Status: http.StatusBadRequest, Code: "invalid_cursor", Field: "cursor",
			Message: "cursor names no prediction of this list: " + strconv.Quote(cursor) + "; start again without it"})
		return
	case err != nil:
		if e, ok := face.AsError(err); ok {
			f.WriteError(w, e)
			return
		}
		f.m.Logger.Warn().Err(err).Msg("listing predictions failed")
		f.WriteError(w, unavailable("listing the predictions"))
		return
	}
	base := f.base(r)
	page := predictionList{Results: make([]prediction, 0, len(jobs))}
	for _, j := range jobs {
		page.Results = append(page.Results, predictionOf(j, base, nil))
	}
	if more && len(jobs) > 0 {
		next := base + "/v1/predictions?cursor=" + url.QueryEscape(jobs[len(jobs)-1].ID)
		page.Next = &next
	}
	writeJSON(w, http.StatusOK, page)
}

// cancel asks for a prediction's cancel and answers it as it stands once
// the cancel has landed or CancelWait has passed; a prediction that has
// ended is answered as it is.
func (f *Face) cancel(w http.ResponseWriter, r *http.Request) {
	j, fe := f.job(r)
	if fe != nil {
		f.WriteError(w, *fe)
		return
	}
	if f.pending.has(j) {
		// A create not taken yet has no record to cancel.
		f.WriteError(w, face.Error{Status: http.StatusConflict, Code: "not_taken_yet", Message: "the prediction is not taken yet; retry in a few seconds", RetryAfter: time.Second})
		return
	}
	switch err := f.p.Cancel(r.Context(), r, j, "canceled through the Replicate face"); {
	case errors.Is(err, face.ErrTerminal):
	case err != nil:
		f.m.Logger.Warn().Err(err).Str("job_id", j.ID).Msg("asking for a cancel failed")
		f.WriteError(w, unavailable("asking for the cancel"))
		return
	default:
		ctx, cancel := context.WithTimeout(r.Context(), CancelWait)
		defer cancel()
		if last, err := f.p.Wait(ctx, j.ID, func(j *state.Job) bool { return j.State.Terminal() }); err == nil {
			j = last
		}
	}
	writeJSON(w, http.StatusOK, predictionOf(j, f.base(r), nil))
}

// job reads the record of the path's prediction: one of this face's
// route (a model route's job was routed through it).
func (f *Face) job(r *http.Request) (*state.Job, *face.Error) {
	id := r.PathValue("id")
	j, err := f.p.Job(r.Context(), id)
	if errors.Is(err, state.ErrNotFound) {
		if p := f.pending.get(id, f.m.Clock()); p != nil {
			return p, nil // this process answered its create
		}
		// Another gateway may have answered it a moment ago.
		j, err = f.m.AwaitRecord(r.Context(), f.p, id)
	}
	switch {
	case errors.Is(err, state.ErrNotFound):
		e := notFound("no prediction " + id)
		return nil, &e
	case err != nil:
		f.m.Logger.Warn().Err(err).Str("job_id", id).Msg("reading a prediction failed")
		e := unavailable("reading the prediction")
		return nil, &e
	case j.Route != f.m.Route && (j.Routing == nil || j.Routing.Via != f.m.Route):
		e := notFound("no prediction " + id)
		return nil, &e
	}
	return j, nil
}

// base is the face's absolute URL as the request reached it.
func (f *Face) base(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + r.Host + f.m.Prefix
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
