package frontdoor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/edge/census"
	"github.com/pollux-dev/pollux/internal/edge/index"
	"github.com/pollux-dev/pollux/internal/edge/tenant"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Routes is what GET /v1/routes answers.
type Routes struct {
	// At is when the census was taken.
	At time.Time `json:"at"`
	// Routes are the front door's routes, by name.
	Routes []RouteView `json:"routes"`
	// Levels are the shared budget levels (accounts, global, a route's
	// running slots): leases out and caps.
	Levels []census.Level `json:"levels"`
	// Activity is the last hour of every route together (absent without
	// an index).
	Activity *index.Activity `json:"activity,omitempty"`
}

// RouteView is one route in GET /v1/routes.
type RouteView struct {
	Name string `json:"name"`
	// State is running or paused; StateText says by whom, until when and
	// why, as `pollux routes` prints it.
	State     string `json:"state"`
	StateText string `json:"state_text"`
	// Pause is the pause in force, the operator's first; Pauses every one
	// in force (an operator's and the provider's may overlap).
	Pause  *PauseView  `json:"pause,omitempty"`
	Pauses []PauseView `json:"pauses"`
	// Tracked, Parked, Backlog, Intake, OldestS and Leases are the
	// census's (census.Route).
	Tracked int                      `json:"tracked"`
	Parked  int                      `json:"parked"`
	Backlog int                      `json:"backlog"`
	Intake  int                      `json:"intake"`
	OldestS float64                  `json:"oldest_s"`
	Leases  map[string]census.Leases `json:"leases"`
	// Webhooks is true when the route asks its provider for webhooks (a
	// webhook_url); false: it is poll-only, and webhook coverage means
	// nothing for it.
	Webhooks bool `json:"webhooks"`
	// Running are the route's own running slots, when it caps them.
	Running *census.Leases `json:"running,omitempty"`
	// Counts are the index's jobs by current state, Activity its last
	// hour (both absent without an index).
	Counts   map[state.State]int `json:"counts,omitempty"`
	Activity *index.Activity     `json:"activity,omitempty"`
	// Waiting counts the index's pending jobs waiting before their
	// submission (held while the route is paused, waiting for running
	// slots) by what they wait for (absent without an index, or none).
	Waiting map[string]int `json:"waiting,omitempty"`
	// Events are the route's latest events, oldest first: operators'
	// pauses and resumes, models' drifts (absent without an index).
	Events []events.RouteEvent `json:"events,omitempty"`
}

// PauseView is a route's pause.
type PauseView struct {
	// Kind is operator (route pause) or provider (the provider held calls
	// back); Cause is the provider's pause kind (rate_limit, auth).
	Kind  string `json:"kind"`
	Cause string `json:"cause,omitempty"`
	// Until is when calls may start again (absent: until resumed).
	Until *time.Time `json:"until,omitempty"`
	// Since is when the pause began.
	Since  time.Time `json:"since"`
	Reason string    `json:"reason,omitempty"`
	// By names the operator (operator pauses only).
	By string `json:"by,omitempty"`
}

// Pause kinds of PauseView.
const (
	PauseKindOperator = "operator"
	PauseKindProvider = "provider"
)

func pauseView(p route.Pause) PauseView {
	v := PauseView{Kind: PauseKindOperator, Since: p.Since, Reason: p.Reason, By: p.By}
	if p.Kind != route.PauseOperator {
		v.Kind, v.Cause = PauseKindProvider, p.Kind
	}
	if !p.Until.IsZero() {
		u := p.Until
		v.Until = &u
	}
	return v
}

// routes handles GET /v1/routes: to an app's tokens without the fleet's
// numbers (tenant.Viewer.SeesFleet).
func (s *Server) routes(w http.ResponseWriter, r *http.Request) *apiError {
	if s.cfg.Census == nil {
		return fail(http.StatusServiceUnavailable, CodeUnavailable, "", "this front door takes no census of its routes")
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	snap, err := s.census.take(ctx, s.cfg.Census, s.cfg.Now())
	if err != nil {
		return s.unavailable(err, "taking the census of the routes")
	}
	fleet := tenant.From(r.Context()).SeesFleet()
	out := Routes{At: snap.At, Routes: []RouteView{}, Levels: nonNil(snap.Levels)}
	if !fleet {
		out.Levels = []census.Level{}
	}
	if x := s.cfg.Index; x != nil && fleet {
		a := x.Activity("")
		out.Activity = &a
	}
	for _, cr := range snap.Routes {
		v := RouteView{
			Name: cr.Route, State: "running", StateText: cr.StateText(snap.At), Pauses: []PauseView{},
			Tracked: cr.Tracked, Parked: cr.Parked, Backlog: cr.Backlog, Intake: cr.Intake, OldestS: time.Duration(cr.Oldest).Seconds(),
			Leases: cr.Leases, Webhooks: slices.Contains(s.cfg.WebhookRoutes, cr.Route),
		}
		if cr.Paused() {
			v.State = "paused"
		}
		for _, p := range []*route.Pause{cr.Operator, cr.Pause} {
			if p != nil {
				v.Pauses = append(v.Pauses, pauseView(*p))
			}
		}
		if len(v.Pauses) > 0 {
			v.Pause = &v.Pauses[0]
		}
		for _, l := range snap.Levels {
			if l.Level == "route "+cr.Route && l.Running != nil {
				v.Running = l.Running
			}
		}
		if !fleet {
			// An app's tokens: the route's name, state and pauses, no
			// number of the fleet's (tenant.Viewer.SeesFleet).
			v.Tracked, v.Parked, v.Backlog, v.Intake, v.OldestS, v.Leases, v.Running = 0, 0, 0, 0, 0, map[string]census.Leases{}, nil
			out.Routes = append(out.Routes, v)
			continue
		}
		if x := s.cfg.Index; x != nil {
			a := x.Activity(cr.Route)
			v.Counts, v.Activity, v.Events = x.Counts(cr.Route), &a, x.RouteEvents(cr.Route)
			if w := x.Waiting(cr.Route); len(w) > 0 {
				v.Waiting = w
			}
		}
		out.Routes = append(out.Routes, v)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// censusMaxAge is how long a census answers GET /v1/routes: every console
// open on a fleet polls it, and a census reads consumer infos and messages
// of every route.
const censusMaxAge = time.Second

// censusCache keeps the latest census, taking one at a time.
type censusCache struct {
	mu   sync.Mutex
	snap *census.Snapshot
	at   time.Time
}

// take returns a census at most censusMaxAge old at now.
func (c *censusCache) take(ctx context.Context, census func(context.Context) (*census.Snapshot, error), now time.Time) (*census.Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap != nil && now.Sub(c.at) < censusMaxAge && !now.Before(c.at) {
		return c.snap, nil
	}
	snap, err := census(ctx)
	if err != nil {
		return nil, err
	}
	c.snap, c.at = snap, now
	return snap, nil
}

// invalidate makes the next GET /v1/routes take a new census: a pause or
// resume shows at once.
func (c *censusCache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.snap = nil
}

// RouteAction answers a pause or resume: the route's state after it, and
// the pause written (pause) or ended (resume).
type RouteAction struct {
	Route string    `json:"route"`
	State string    `json:"state"`
	Pause PauseView `json:"pause"`
}

// maxRouteActionBody bounds a pause or resume body.
const maxRouteActionBody = 4 << 10

// pause handles POST /v1/routes/{name}/pause with
// {"reason"?, "for"?: "30m" | "until"?: RFC 3339}: an operator's pause of
// the route across the fleet (route.PauseAndRecord), by the principal.
func (s *Server) pause(w http.ResponseWriter, r *http.Request) *apiError {
	name, e := s.actionRoute(r)
	if e != nil {
		return e
	}
	var req struct {
		Reason string    `json:"reason"`
		For    string    `json:"for"`
		Until  time.Time `json:"until"`
	}
	if e := readAction(w, r, &req); e != nil {
		return e
	}
	until := req.Until
	switch {
	case req.For != "" && !req.Until.IsZero():
		return fail(http.StatusBadRequest, CodeInvalidField, "for", "for: give for or until, not both")
	case req.For != "":
		d, err := time.ParseDuration(req.For)
		if err != nil || d <= 0 {
			return fail(http.StatusBadRequest, CodeInvalidField, "for", "for: must be a positive duration such as 30m or 2h")
		}
		until = s.cfg.Now().Add(d)
	case !until.IsZero() && !until.After(s.cfg.Now()):
		return fail(http.StatusBadRequest, CodeInvalidField, "until", "until: must be in the future")
	}
	if e := checkReason(req.Reason); e != nil {
		return e
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	by := who(r).by(r)
	ps, err := route.PauseAndRecord(ctx, s.cfg.Pauses, s.js, s.ns, name, until, by, req.Reason)
	if err != nil {
		return s.unavailable(err, "pausing route "+name)
	}
	s.census.invalidate()
	s.log.Info().Str(logkey.Route, name).Str(logkey.By, by).Time(logkey.Until, ps.Until).Str(logkey.Reason, req.Reason).Msg("route paused")
	writeJSON(w, http.StatusOK, RouteAction{Route: name, State: "paused", Pause: pauseView(ps)})
	return nil
}

// resume handles POST /v1/routes/{name}/resume with {"reason"?}: the end
// of the operator's pause (route.ResumeAndRecord); 409 not_paused when
// there is none.
func (s *Server) resume(w http.ResponseWriter, r *http.Request) *apiError {
	name, e := s.actionRoute(r)
	if e != nil {
		return e
	}
	var req struct {
		Reason string `json:"reason"`
	}
	if e := readAction(w, r, &req); e != nil {
		return e
	}
	if e := checkReason(req.Reason); e != nil {
		return e
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	by := who(r).by(r)
	was, inForce, err := route.ResumeAndRecord(ctx, s.cfg.Pauses, s.js, s.ns, name, by, req.Reason)
	switch {
	case err != nil:
		return s.unavailable(err, "resuming route "+name)
	case !inForce:
		return fail(http.StatusConflict, CodeNotPaused, "", fmt.Sprintf("route %s has no operator's pause in force", name))
	}
	s.census.invalidate()
	s.log.Info().Str(logkey.Route, name).Str(logkey.By, by).Str(logkey.Reason, req.Reason).Msg("route resumed")
	state := "running"
	if s.providerPaused(name) {
		state = "paused"
	}
	writeJSON(w, http.StatusOK, RouteAction{Route: name, State: state, Pause: pauseView(was)})
	return nil
}

// providerPaused reports whether the provider's pause of route is in
// force.
func (s *Server) providerPaused(name string) bool {
	_, ok := s.cfg.Pauses.Active(name)
	return ok
}

// actionRoute returns the route a pause or resume names, once it is known
// that the front door can pause and that an operator asks.
func (s *Server) actionRoute(r *http.Request) (string, *apiError) {
	if !who(r).operator() {
		return "", fail(http.StatusForbidden, CodeForbidden, "", "pausing and resuming a route, which every app shares, is an operator's: an admin token's")
	}
	if s.cfg.Pauses == nil {
		return "", fail(http.StatusServiceUnavailable, CodeUnavailable, "", "this front door cannot pause routes (it has no routes bucket)")
	}
	name := r.PathValue("name")
	if !s.knownRoute(name) {
		return "", fail(http.StatusNotFound, CodeUnknownRoute, "name", fmt.Sprintf("no route named %q", name))
	}
	return name, nil
}

// readAction reads an optional JSON body into v.
func readAction(w http.ResponseWriter, r *http.Request, v any) *apiError {
	body, e := readJSON(w, r, maxRouteActionBody)
	if e != nil || len(bytes.TrimSpace(body)) == 0 {
		return e
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fail(http.StatusBadRequest, CodeInvalidField, te.Field, te.Field+": must be a JSON "+te.Type.String())
		}
		var pe *time.ParseError
		if errors.As(err, &pe) {
			return fail(http.StatusBadRequest, CodeInvalidField, "until", "until: must be an RFC 3339 time such as 2026-11-29T15:04:05Z")
		}
		return fail(http.StatusBadRequest, CodeInvalidBody, "", "not a JSON object: "+err.Error())
	}
	return nil
}

// checkReason checks an operator's reason as route.PauseRoute will.
func checkReason(reason string) *apiError {
	if len(reason) > route.MaxPauseReason || !utf8.ValidString(reason) {
		return fail(http.StatusBadRequest, CodeInvalidField, "reason", fmt.Sprintf("reason: at most %d bytes of UTF-8", route.MaxPauseReason))
	}
	return nil
}
