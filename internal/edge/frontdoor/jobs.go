package frontdoor

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/pollux-dev/pollux/internal/edge/tenant"
	"github.com/pollux-dev/pollux/internal/platform/faultpoint"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/state"
)

// maxCancelBody is the largest cancel request body: a reason and some room.
const maxCancelBody = 4 << 10

// Accepted answers a submission or cancel request that was published.
type Accepted struct {
	// ID is the job id.
	ID string `json:"id"`
	// Route is the job's route.
	Route string `json:"route"`
	// Links are the job's endpoints.
	Links Links `json:"links"`
}

// Links are a job's endpoints, relative to the front door's root.
type Links struct {
	// Self is the job's record.
	Self string `json:"self"`
	// Events is the job's event stream; it names the route, so it works
	// before ingest has taken the submission.
	Events string `json:"events"`
	// Cancel cancels the job.
	Cancel string `json:"cancel"`
}

func accepted(id, route string) Accepted {
	self := "/v1/jobs/" + id
	return Accepted{ID: id, Route: route, Links: Links{
		Self: self, Events: self + "/events?route=" + url.QueryEscape(route), Cancel: self + "/cancel",
	}}
}

// submit handles POST /v1/jobs: the body is a submission with its route.
func (s *Server) submit(w http.ResponseWriter, r *http.Request) *apiError {
	body, e := readJSON(w, r, events.MaxMessageBytes)
	if e != nil {
		return e
	}
	m, err := events.DecodeSubmit(body)
	if err != nil {
		return invalid(err)
	}
	route, e := s.intakeRoute(body, m.Deadline, true)
	if e != nil {
		return e
	}
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		if m.IdempotencyKey != "" && m.IdempotencyKey != key {
			return fail(http.StatusBadRequest, CodeIdempotencyKeyMismatch, "idempotency_key",
				"the Idempotency-Key header and the body's idempotency_key differ; send one, or the same in both")
		}
		m.IdempotencyKey = key
	}
	id := m.ID
	switch {
	case id != "":
	case m.IdempotencyKey != "":
		app, e := s.appOf(who(r), m.App)
		if e != nil {
			return e
		}
		id = events.AppKeyID(route, app, m.IdempotencyKey)
	default:
		id = newID()
		m.ID = id
	}
	// The header's key joined the body: what is published is validated.
	if e := s.publishSubmit(r.Context(), r, "POST /v1/jobs", route, *m); e != nil {
		return e
	}
	a := accepted(id, route)
	w.Header().Set("Location", a.Links.Self)
	writeJSON(w, http.StatusAccepted, a)
	return nil
}

// track handles POST /v1/jobs/track: the body is a track message (a job
// submitted elsewhere, by its provider's id) with its route. Without an id
// the job's id derives from the remote id, so tracking it twice is one job.
func (s *Server) track(w http.ResponseWriter, r *http.Request) *apiError {
	body, e := readJSON(w, r, events.MaxMessageBytes)
	if e != nil {
		return e
	}
	m, err := events.DecodeTrack(body)
	if err != nil {
		return invalid(err)
	}
	route, e := s.intakeRoute(body, m.Deadline, false)
	if e != nil {
		return e
	}
	if m.App, e = s.appOf(who(r), m.App); e != nil {
		return e
	}
	id := cmp.Or(m.ID, events.AppRemoteKeyID(route, m.App, m.RemoteID))
	data, err := encode(m)
	if err != nil {
		return invalid(err)
	}
	// A track request answered 503 in doubt is not settled: its retry is
	// the same job (its id derives from the remote id, or is given), and
	// a copy stored late tracks a job the provider has.
	if err := s.publishIntake(r.Context(), r, "POST /v1/jobs/track", events.KindTrack, route, id, data); err != nil {
		return s.notPublished(err, "the track request", "retry it: its retry is the same job")
	}
	s.log.Debug().Str(logkey.JobID, id).Str(logkey.Route, route).Str(logkey.By, who(r).by(r)).Msg("track request published")
	a := accepted(id, route)
	w.Header().Set("Location", a.Links.Self)
	writeJSON(w, http.StatusAccepted, a)
	return nil
}

// get handles GET /v1/jobs/{id}: the job's record (JobView).
func (s *Server) get(w http.ResponseWriter, r *http.Request) *apiError {
	j, e := s.job(r.Context(), r.PathValue("id"))
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, JobView(j))
	return nil
}

// deliveries handles GET /v1/jobs/{id}/deliveries: the job's outbound
// webhook deliveries, one per endpoint (package notify), as `pollux get`
// shows them; an empty list where no endpoint is configured.
func (s *Server) deliveries(w http.ResponseWriter, r *http.Request) *apiError {
	j, e := s.job(r.Context(), r.PathValue("id"))
	if e != nil {
		return e
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	ds, err := events.OutboxDeliveries(ctx, s.js, s.ns, j.ID)
	if err != nil {
		return s.unavailable(err, "reading the job's deliveries")
	}
	if ds == nil {
		ds = []events.OutboxDelivery{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"deliveries": ds})
	return nil
}

// JobView is a job's record as GET /v1/jobs/{id} returns it and `pollux
// get` prints it: its snapshot, as events carry it (state.Job.Snapshot).
func JobView(j *state.Job) *state.Job { return j.Snapshot() }

// cancel handles POST /v1/jobs/{id}/cancel, with an optional body
// {"reason": ...}.
func (s *Server) cancel(w http.ResponseWriter, r *http.Request) *apiError {
	body, e := readJSON(w, r, maxCancelBody)
	if e != nil {
		return e
	}
	var req struct {
		Reason string `json:"reason"`
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				return fail(http.StatusBadRequest, CodeInvalidField, te.Field, te.Field+": must be a JSON string")
			}
			return fail(http.StatusBadRequest, CodeInvalidBody, "", "not a JSON object: "+err.Error())
		}
	}
	j, e := s.job(r.Context(), r.PathValue("id"))
	if e != nil {
		return e
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	if e := s.requestCancel(ctx, r, j, req.Reason); e != nil {
		return e
	}
	writeJSON(w, http.StatusAccepted, accepted(j.ID, j.Route))
	return nil
}

// requestCancel publishes request r's cancel of job j (the one way the
// front door cancels, one job or many), saying who asks and why; a
// finished job is a 409.
func (s *Server) requestCancel(ctx context.Context, r *http.Request, j *state.Job, reason string) *apiError {
	return s.requestCancelBy(ctx, j, reason, who(r).by(r))
}

// requestCancelBy is requestCancel on behalf of by (who.by).
func (s *Server) requestCancelBy(ctx context.Context, j *state.Job, reason, by string) *apiError {
	if j.State.Terminal() {
		return fail(http.StatusConflict, CodeJobTerminal, "", fmt.Sprintf("job %s has finished (%s)", j.ID, j.State))
	}
	data, err := encode(events.Cancel{V: events.Version, ID: j.ID, Reason: reason, By: by})
	if err != nil {
		return invalid(err)
	}
	if _, err := events.DecodeCancel(data); err != nil {
		return invalid(err)
	}
	// The request is recorded first: a job that never reached the
	// provider (held behind a pause, waiting for a slot) ends at once,
	// whatever waits before the message in the route's intake; the
	// message carries a provider cancel out.
	rec, ended, err := s.jobs.RequestCancel(ctx, j.Route, j.ID, reason, by)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return noJob(j.ID)
	case err != nil:
		return s.unavailable(err, "recording the cancel request")
	case ended:
		s.log.Info().Str(logkey.JobID, j.ID).Str(logkey.Route, j.Route).Str(logkey.By, by).Msg("canceled before it was submitted")
		return nil
	case rec.State.Terminal():
		return fail(http.StatusConflict, CodeJobTerminal, "", fmt.Sprintf("job %s has finished (%s)", j.ID, rec.State))
	}
	if _, err := s.js.Publish(ctx, s.ns.Cancel(j.Route), data); err != nil {
		return s.unavailable(err, "publishing the cancel request")
	}
	s.log.Info().Str(logkey.JobID, j.ID).Str(logkey.Route, j.Route).Str(logkey.By, by).Msg("cancel request published")
	return nil
}

// publishSubmit publishes submission m (its id set) on route as request
// r's caller — who acts is who the front door knows, not what the body
// says — after validating exactly what is published. It is the one way
// the front door submits: POST /v1/jobs and every face. It answers
// success once the submission is stored, exactly once (an ack); 503 when
// nothing was or will be stored; and 503 when its storing stayed in
// doubt for DoubtWait, then settles it (settle.go), so that a create
// answered 503 makes no job.
func (s *Server) publishSubmit(ctx context.Context, r *http.Request, endpoint, route string, m events.Submit) *apiError {
	p := who(r)
	m.By = p.by(r)
	app, e := s.appOf(p, m.App)
	if e != nil {
		return e
	}
	m.App = app
	if e := s.checkInputs(ctx, r, m); e != nil {
		return e
	}
	id := m.ID // the job's id: given, or derived from the idempotency key
	if id == "" {
		id = events.AppKeyID(route, m.App, m.IdempotencyKey)
	}
	data, err := encode(m)
	if err != nil {
		return invalid(err)
	}
	if _, err := events.DecodeSubmit(data); err != nil {
		return invalid(err)
	}
	if e := s.admitSpend(ctx, route, id, m); e != nil {
		return e
	}
	faultpoint.Hit("after-admit") // its app's waiting place and spend are taken; nothing is published yet
	err = s.publishIntake(ctx, r, endpoint, events.KindSubmit, route, id, data)
	if un := (*unconfirmed)(nil); errors.As(err, &un) {
		s.settle(route, id, m, un.err)
	}
	if un := (*unconfirmed)(nil); err != nil && !errors.As(err, &un) {
		// Nothing was stored: its admission is given back.
		if rerr := s.cfg.Spend.Release(context.WithoutCancel(ctx), m.App, id); rerr != nil {
			s.log.Warn().Err(rerr).Str(logkey.JobID, id).Msg("giving back a create's admission failed: its app counts it until it expires")
		}
	}
	if err != nil {
		return s.notPublished(err, "the submission", "Pollux makes sure it makes no job: retry")
	}
	s.log.Debug().Str(logkey.JobID, id).Str(logkey.Route, route).Str(logkey.By, m.By).Str(logkey.Endpoint, endpoint).Msg("submission published")
	return nil
}

// appOf is the app of a job principal p creates whose submission names
// app: p's own for a token of an app — a submission naming another is
// refused, naming the field — else (an admin, a front door without
// tokens) the one it names, which must be a configured app when apps are
// configured.
func (s *Server) appOf(p principal, app string) (string, *apiError) {
	v := p.viewer()
	switch {
	case v.Scoped && app != "" && app != v.App:
		return "", fail(http.StatusBadRequest, CodeInvalidField, "app", fmt.Sprintf("app: this token creates jobs of app %q, not %q", v.App, app))
	case v.Scoped:
		return v.App, nil
	case app != "" && !events.ValidApp(app):
		return "", fail(http.StatusBadRequest, CodeInvalidField, "app", fmt.Sprintf("app: an app is 1 to %d characters of [A-Za-z0-9_-]", events.MaxAppLen))
	case app != "" && len(s.cfg.Apps) > 0 && !slices.Contains(s.cfg.Apps, app):
		return "", fail(http.StatusBadRequest, CodeInvalidField, "app", fmt.Sprintf("app: %q is not one of the configured apps", app))
	}
	return app, nil
}

// notPublished is the 503 of an intake message (what) that was not
// stored (a *notStored) or whose storing was not confirmed (an
// *unconfirmed: then says what follows), saying which.
func (s *Server) notPublished(err error, what, then string) *apiError {
	if un := (*unconfirmed)(nil); errors.As(err, &un) {
		return fail(http.StatusServiceUnavailable, CodeUnavailable, "", "NATS did not confirm "+what+" in time; "+then)
	}
	s.log.Warn().Err(err).Msg("publishing " + what + " failed: nothing was stored")
	return fail(http.StatusServiceUnavailable, CodeUnavailable, "", "NATS is unavailable: "+what+" was not stored; retry later")
}

// job reads the record of the job the path names, as the request whose
// context ctx is may see it: another app's job is answered exactly as an
// unknown id (tenant.Viewer.Sees).
func (s *Server) job(ctx context.Context, id string) (*state.Job, *apiError) {
	if !events.ValidToken(id) {
		return nil, fail(http.StatusBadRequest, CodeInvalidParameter, "id", "a job id is 1-128 characters of [A-Za-z0-9_-]")
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	j, err := s.jobs.Get(ctx, id)
	switch {
	case errors.Is(err, state.ErrNotFound), err == nil && !tenant.From(ctx).Sees(j):
		return nil, noJob(id)
	case err != nil:
		return nil, s.unavailable(err, "reading job "+id)
	}
	return j, nil
}

// noJob is the answer about job id when there is none the request may
// see: the same whether no job has that id or another app's has.
func noJob(id string) *apiError {
	return fail(http.StatusNotFound, CodeJobNotFound, "", "no job "+id)
}

// readJSON reads a request body of at most limit bytes that must be JSON
// (a missing Content-Type is taken as JSON).
func readJSON(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apiError) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return nil, fail(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "Content-Type", "the body must be application/json")
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, fail(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "", fmt.Sprintf("the body is larger than %d bytes", limit))
		}
		return nil, fail(http.StatusBadRequest, CodeInvalidBody, "", "reading the body failed")
	}
	return body, nil
}

// intakeRoute checks what a submission or track request's body says beyond
// the message: its deadline is not past (wrong whatever the route: refused
// here, as ingest would refuse it; a deadline beyond the route's
// max_deadline depends on the route's configuration and comes as a
// rejected event) and its route is configured. It returns the route.
func (s *Server) intakeRoute(body []byte, deadline time.Time, models bool) (string, *apiError) {
	if now := s.cfg.Now(); !deadline.IsZero() && !deadline.After(now) {
		return "", fail(http.StatusBadRequest, CodeInvalidField, "deadline",
			fmt.Sprintf("deadline: %s is in the past", deadline.UTC().Format(time.RFC3339)))
	}
	route, e := routeOf(body)
	if e != nil {
		return "", e
	}
	switch {
	case s.knownRoute(route):
	case slices.Contains(s.cfg.ModelRoutes, route) && models:
	case slices.Contains(s.cfg.ModelRoutes, route):
		return "", fail(http.StatusBadRequest, CodeInvalidField, "route", fmt.Sprintf("%s is a model route: track the job on the route it was submitted to", route))
	default:
		return "", fail(http.StatusNotFound, CodeUnknownRoute, "route", fmt.Sprintf("no route named %q", route))
	}
	return route, nil
}

// routeOf returns the body's route field.
func routeOf(body []byte) (string, *apiError) {
	var head struct {
		Route *string `json:"route"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return "", fail(http.StatusBadRequest, CodeInvalidField, "route", "route: must be a JSON string")
	}
	switch {
	case head.Route == nil || *head.Route == "":
		return "", fail(http.StatusBadRequest, CodeInvalidField, "route", "route: required")
	case !events.ValidToken(*head.Route):
		return "", fail(http.StatusBadRequest, CodeInvalidField, "route", "route: must be 1-128 characters of [A-Za-z0-9_-]")
	}
	return *head.Route, nil
}

// invalid maps a contract validation error to its 400.
func invalid(err error) *apiError {
	var fe *events.FieldError
	if errors.As(err, &fe) && fe.Field != "" {
		return fail(http.StatusBadRequest, CodeInvalidField, fe.Field, fe.Error())
	}
	return fail(http.StatusBadRequest, CodeInvalidBody, "", err.Error())
}

// encode marshals a message without escaping HTML characters, so the
// provider input passes through as the caller wrote it.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID returns a random job id for a submission that names neither an id
// nor an idempotency key: "h-" and 26 characters, the shape of derived ids.
func newID() string {
	b := make([]byte, 17)
	_, _ = rand.Read(b)
	return "h-" + idEncoding.EncodeToString(b)[:26]
}
