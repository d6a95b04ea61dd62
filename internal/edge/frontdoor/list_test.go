package frontdoor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/edge/index"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// t0 is the creation time of the first job the list tests make.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// event publishes a job's event as ingest or the poller would, the job
// snapshot in it.
func (d *door) event(t *testing.T, j state.Job, seq uint64) {
	t.Helper()
	ev := events.NewEvent(&j, state.OutboxEvent{Seq: seq, Type: string(j.State), State: j.State, At: j.CreatedAt.Add(time.Duration(seq) * time.Second)})
	b, err := ev.Encode()
	require.NoError(t, err)
	_, err = d.js.Publish(context.Background(), d.ns.Event(j.Route, j.ID), b)
	require.NoError(t, err)
}

// list gets GET /v1/jobs with query and decodes it.
func (d *door) list(t *testing.T, query string) frontdoor.JobList {
	t.Helper()
	r := d.do(t, http.MethodGet, "/v1/jobs?"+query, "", nil)
	require.Equal(t, http.StatusOK, r.status, "query %s: body %s", query, r.raw)
	var l frontdoor.JobList
	require.NoError(t, json.Unmarshal(r.raw, &l))
	return l
}

func ids(l frontdoor.JobList) []string {
	out := []string{}
	for _, e := range l.Jobs {
		out = append(out, e.ID)
	}
	return out
}

// twelve publishes the events of jobs job-0 .. job-11, one a minute from
// t0: the even ones on sim, the odd ones on other; model m-a every third,
// else m-b; the first six running, the rest succeeded.
func (d *door) twelve(t *testing.T) {
	t.Helper()
	for i := range 12 {
		j := state.Job{ID: fmt.Sprintf("job-%d", i), Route: map[bool]string{true: route, false: "other"}[i%2 == 0],
			Model: map[bool]string{true: "m-a", false: "m-b"}[i%3 == 0], State: state.Running,
			IdempotencyKey: fmt.Sprintf("order-%d", i), RemoteID: fmt.Sprintf("r-%d", i), CreatedAt: t0.Add(time.Duration(i) * time.Minute)}
		if i >= 6 {
			j.State = state.Succeeded
		}
		d.event(t, j, 1)
	}
	require.Eventually(t, func() bool { n, _ := d.index.Size(); return n == 12 }, 10*time.Second, 10*time.Millisecond)
}

// GET /v1/jobs filters the index by route, states, model, creation time
// and search, newest first, and pages with its cursor.
func TestListJobs(t *testing.T) {
	t.Parallel()
	d := setupWith(t, frontdoor.Config{}, withIndex)
	d.twelve(t)

	all := d.list(t, "")
	require.Equal(t, 12, all.Total)
	require.False(t, all.TotalCapped)
	require.Empty(t, all.Next)
	require.Equal(t, "job-11", all.Jobs[0].ID, "newest first")
	require.Equal(t, "order-11", all.Jobs[0].IdempotencyKey)

	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"route=sim", []string{"job-10", "job-8", "job-6", "job-4", "job-2", "job-0"}},
		{"route=sim&state=running,queued", []string{"job-4", "job-2", "job-0"}},
		{"state=succeeded&route=other", []string{"job-11", "job-9", "job-7"}},
		{"model=m-a", []string{"job-9", "job-6", "job-3", "job-0"}},
		{"q=order-7", []string{"job-7"}},
		{"q=r-5", []string{"job-5"}},
		{"q=job-3", []string{"job-3"}},
		{"q=nothing", []string{}},
		{"created_after=" + url.QueryEscape(t0.Add(9*time.Minute).Format(time.RFC3339)), []string{"job-11", "job-10"}},
		{"created_before=" + url.QueryEscape(t0.Add(2*time.Minute).Format(time.RFC3339)), []string{"job-1", "job-0"}},
	} {
		l := d.list(t, tc.query)
		require.Equal(t, tc.want, ids(l), tc.query)
		require.Equal(t, len(tc.want), l.Total, tc.query)
	}

	// The state counts follow every filter but the states: the route's
	// and model's, not the whole fleet's.
	require.Equal(t, map[state.State]int{state.Running: 6, state.Succeeded: 6}, all.Counts)
	require.Equal(t, map[state.State]int{state.Running: 3, state.Succeeded: 3}, d.list(t, "route=sim&state=running").Counts)
	require.Equal(t, map[state.State]int{state.Running: 1, state.Succeeded: 1}, d.list(t, "route=sim&model=m-a").Counts)
	require.Equal(t, map[state.State]int{state.Succeeded: 1}, d.list(t, "q=order-7&state=running").Counts)
	require.Equal(t, map[state.State]int{}, d.list(t, "q=order").Counts, "a search is exact: a prefix finds nothing")

	// Paging walks every job once, in order.
	var walked []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 3)
		l := d.list(t, "limit=5&cursor="+url.QueryEscape(cursor))
		require.Equal(t, 12, l.Total)
		walked = append(walked, ids(l)...)
		if l.Next == "" {
			break
		}
		cursor = l.Next
	}
	require.Equal(t, ids(all), walked)

	for _, tc := range []struct{ query, field string }{
		{"state=bogus", "state"},
		{"state=running,", "state"},
		{"limit=0", "limit"},
		{"limit=501", "limit"},
		{"limit=ten", "limit"},
		{"created_after=yesterday", "created_after"},
		{"created_before=2026-13-01", "created_before"},
		{"cursor=not-a-cursor!", "cursor"},
		{"route=" + url.QueryEscape("a/b"), "route"},
	} {
		r := d.do(t, http.MethodGet, "/v1/jobs?"+tc.query, "", nil)
		requireError(t, r, http.StatusBadRequest, frontdoor.CodeInvalidParameter, tc.field)
	}
}

// Without an index the list endpoints say so.
func TestListWithoutIndex(t *testing.T) {
	t.Parallel()
	d := setup(t, frontdoor.Config{})
	for _, path := range []string{"/v1/jobs", "/v1/stream", "/v1/models"} {
		r := d.do(t, http.MethodGet, path, "", nil)
		requireError(t, r, http.StatusServiceUnavailable, frontdoor.CodeUnavailable, "")
		require.Contains(t, r.body["error"].(map[string]any)["message"], "index")
	}
}

// GET /v1/stream sends every change to the index's jobs of the route as a
// "job" event whose data is the job's entry and whose id is the change's
// place in the events stream; a client resuming with Last-Event-ID gets
// every job changed since, as it is now, then the live changes.
func TestLiveStream(t *testing.T) {
	t.Parallel()
	d := setupWith(t, frontdoor.Config{MaxResume: 2}, withIndex)
	s := d.open(t, "/v1/stream?route=sim", nil)
	require.Equal(t, http.StatusOK, s.resp.StatusCode)
	require.Equal(t, "text/event-stream", s.resp.Header.Get("Content-Type"))

	other := state.Job{ID: "o-1", Route: "other", Model: "m", State: state.Queued, CreatedAt: t0}
	d.event(t, other, 1)
	j := state.Job{ID: "s-1", Route: route, Model: "m", State: state.Queued, CreatedAt: t0}
	d.event(t, j, 1)
	j.State = state.Running
	d.event(t, j, 2)

	entry := func(s *stream) (index.Entry, uint64) {
		t.Helper()
		m, ok := s.next(t)
		require.True(t, ok)
		require.Equal(t, "job", m.event)
		id, err := strconv.ParseUint(m.id, 10, 64)
		require.NoError(t, err, "an id to resume from")
		var e index.Entry
		require.NoError(t, json.Unmarshal([]byte(m.data), &e))
		return e, id
	}
	var ids []uint64
	for _, want := range []state.State{state.Queued, state.Running} {
		e, id := entry(s)
		require.Equal(t, "s-1", e.ID, "only the route's jobs")
		require.Equal(t, want, e.State)
		ids = append(ids, id)
	}
	require.Greater(t, ids[1], ids[0])

	// Disconnected after the first: meanwhile s-2 comes and s-1 ends.
	d.event(t, state.Job{ID: "s-2", Route: route, Model: "m", State: state.Queued, CreatedAt: t0}, 1)
	j.State = state.Succeeded
	d.event(t, j, 3)
	d.event(t, state.Job{ID: "o-1", Route: "other", Model: "m", State: state.Running, CreatedAt: t0}, 2)
	require.Eventually(t, func() bool { e, _ := d.index.Get("o-1"); return e.State == state.Running }, 10*time.Second, 10*time.Millisecond)
	resumed := d.open(t, "/v1/stream?route=sim", map[string]string{"Last-Event-ID": strconv.FormatUint(ids[0], 10)})
	e, id2 := entry(resumed)
	require.Equal(t, "s-2", e.ID, "in the order of their changes")
	e, id1 := entry(resumed)
	require.Equal(t, "s-1", e.ID)
	require.Equal(t, state.Succeeded, e.State, "as it is now")
	require.Greater(t, id1, id2)
	d.event(t, state.Job{ID: "s-3", Route: route, Model: "m", State: state.Queued, CreatedAt: t0}, 1)
	e, _ = entry(resumed)
	require.Equal(t, "s-3", e.ID, "then live, nothing sent twice")

	// More changed than MaxResume: one reset event.
	reset := d.open(t, "/v1/stream?route=sim", map[string]string{"Last-Event-ID": "1"})
	m, ok := reset.next(t)
	require.True(t, ok)
	require.Equal(t, "reset", m.event)
	r := d.do(t, http.MethodGet, "/v1/stream", "", map[string]string{"Last-Event-ID": "x"})
	requireError(t, r, http.StatusBadRequest, frontdoor.CodeInvalidParameter, "Last-Event-ID")

	r = d.do(t, http.MethodGet, "/v1/stream?route="+url.QueryEscape("a b"), "", nil)
	requireError(t, r, http.StatusBadRequest, frontdoor.CodeInvalidParameter, "route")
}
