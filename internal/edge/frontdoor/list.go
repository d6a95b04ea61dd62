package frontdoor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/internal/edge/index"
	"github.com/pollux-dev/pollux/internal/edge/tenant"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// JobList is what GET /v1/jobs answers: a page of the index (index.Page).
type JobList struct {
	// Jobs are the page's jobs, newest first.
	Jobs []index.Entry `json:"jobs"`
	// Next is the cursor of the next page, "" at the end.
	Next string `json:"next"`
	// Total counts every match (not only this page's), at most
	// index.TotalCap when TotalCapped.
	Total       int  `json:"total"`
	TotalCapped bool `json:"total_capped"`
	// Counts are the jobs matching every filter but the states, by state
	// (index.Index.StateCounts): what each state would list. CountsCapped
	// says counting stopped at index.TotalCap jobs.
	Counts       map[state.State]int `json:"counts"`
	CountsCapped bool                `json:"counts_capped,omitempty"`
}

// noIndex is the 503 of an endpoint that needs the index when the front
// door has none.
func noIndex() *apiError {
	return fail(http.StatusServiceUnavailable, CodeUnavailable, "",
		"this front door keeps no jobs index (run it from cmd/ingest or pollux serve, which do)")
}

// list handles GET /v1/jobs: the jobs the query selects, newest first, a
// page at a time.
func (s *Server) list(w http.ResponseWriter, r *http.Request) *apiError {
	if s.cfg.Index == nil {
		return noIndex()
	}
	q, e := parseQuery(r.URL.Query())
	if e != nil {
		return e
	}
	q.Viewer = tenant.From(r.Context())
	page, err := s.cfg.Index.List(q)
	if errors.Is(err, index.ErrBadCursor) {
		return fail(http.StatusBadRequest, CodeInvalidParameter, "cursor", err.Error()+"; start again without it")
	}
	if err != nil {
		return fail(http.StatusBadRequest, CodeInvalidParameter, "", err.Error())
	}
	counts, capped := s.cfg.Index.StateCounts(q)
	writeJSON(w, http.StatusOK, JobList{Jobs: nonNil(page.Jobs), Next: page.Next, Total: page.Total, TotalCapped: page.TotalCapped,
		Counts: counts, CountsCapped: capped})
	return nil
}

func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}

// parseQuery reads GET /v1/jobs's parameters: route, state (a
// comma-separated list), model, created_after and created_before (RFC
// 3339), q (a job id, idempotency key or remote id, matched exactly),
// cursor and limit
// (1-500). A bad one is a 400 naming it.
func parseQuery(v url.Values) (index.Query, *apiError) {
	q := index.Query{Route: v.Get("route"), Model: v.Get("model"), Search: strings.TrimSpace(v.Get("q")), Cursor: v.Get("cursor")}
	if q.Route != "" && !events.ValidToken(q.Route) {
		return q, fail(http.StatusBadRequest, CodeInvalidParameter, "route", "a route name is 1-128 characters of [A-Za-z0-9_-]")
	}
	if sv := v.Get("state"); sv != "" {
		for st := range strings.SplitSeq(sv, ",") {
			st := state.State(strings.TrimSpace(st))
			if !slices.Contains(state.States, st) {
				return q, fail(http.StatusBadRequest, CodeInvalidParameter, "state",
					fmt.Sprintf("%q is not a state (states: %s)", st, stateNames()))
			}
			q.States = append(q.States, st)
		}
	}
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{"created_after", &q.CreatedAfter}, {"created_before", &q.CreatedBefore}} {
		if tv := v.Get(p.name); tv != "" {
			t, err := time.Parse(time.RFC3339Nano, tv)
			if err != nil {
				return q, fail(http.StatusBadRequest, CodeInvalidParameter, p.name, "must be an RFC 3339 time such as 2026-11-29T15:04:05Z")
			}
			*p.t = t
		}
	}
	if lv := v.Get("limit"); lv != "" {
		n, err := strconv.Atoi(lv)
		if err != nil || n < 1 || n > index.MaxLimit {
			return q, fail(http.StatusBadRequest, CodeInvalidParameter, "limit", fmt.Sprintf("must be a whole number from 1 to %d", index.MaxLimit))
		}
		q.Limit = n
	}
	return q, nil
}

func stateNames() string {
	names := make([]string, len(state.States))
	for i, st := range state.States {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

// liveBuffer is how many updates a live stream holds for a slow client
// before it loses some (the index never waits for one).
const liveBuffer = 256

// live handles GET /v1/stream?route=: every change to the index's jobs
// (of the route, when given) as Server-Sent Events named job, whose data
// is the job's index.Entry and whose id is the events stream's sequence of
// the change. A client reconnecting with Last-Event-ID (a browser's
// EventSource does so by itself) is first sent every job changed since, as
// it is now, in the order of their changes — or, when more than
// Config.MaxResume changed, one event named reset: reload the list. A client that reads
// too slowly loses updates: the stream is for live lists.
func (s *Server) live(closing context.Context, w http.ResponseWriter, r *http.Request) *apiError {
	if s.cfg.Index == nil {
		return noIndex()
	}
	route := r.URL.Query().Get("route")
	if route != "" && !events.ValidToken(route) {
		return fail(http.StatusBadRequest, CodeInvalidParameter, "route", "a route name is 1-128 characters of [A-Za-z0-9_-]")
	}
	pos, e := parsePosition(r)
	if e != nil {
		return e
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		return fail(http.StatusTooManyRequests, CodeTooManyStreams, "", fmt.Sprintf("%d event streams are open, the most this server serves", cap(s.slots)))
	}
	ctx, stop := context.WithTimeout(r.Context(), s.cfg.MaxStreamDuration)
	defer stop()
	defer context.AfterFunc(closing, stop)()
	// Subscribed first, then what changed since: an update in between is
	// in both, and sent once (through).
	updates := s.cfg.Index.Subscribe(ctx, liveBuffer)
	sse := startSSE(w, s.cfg.WriteTimeout)
	if sse.flush() != nil {
		return nil
	}
	through, v := pos.after, tenant.From(r.Context())
	if pos.after > 0 {
		changed, last, ok := s.cfg.Index.ChangedSince(pos.after, route, v, s.cfg.MaxResume)
		through = max(through, last)
		if !ok {
			if sse.event(through, "reset", []byte(`{"reason":"more jobs changed than a resumption sends: reload the list"}`)) != nil {
				return nil
			}
		}
		for _, e := range changed {
			if !s.sendEntry(sse, e) {
				return nil
			}
		}
	}
	keepAlive := time.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case e, ok := <-updates:
			if !ok {
				return nil // ctx ended
			}
			if route != "" && e.Route != route || e.Stream <= through || !v.SeesApp(e.App) {
				continue
			}
			if !s.sendEntry(sse, e) {
				return nil
			}
		case <-keepAlive.C:
			if sse.comment("keep-alive") != nil {
				return nil
			}
		}
	}
}

// sendEntry writes a job's entry as a live stream's event; false when the
// client is gone.
func (s *Server) sendEntry(sse *sseWriter, e index.Entry) bool {
	data, err := json.Marshal(e)
	if err != nil {
		return true
	}
	return sse.event(e.Stream, "job", data) == nil
}
