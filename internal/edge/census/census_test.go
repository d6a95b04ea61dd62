package census_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/edge/census"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// setup provisions Pollux's streams on a fresh embedded server, with a
// poller consumer for each of routes (the census finds routes by them).
func setup(t *testing.T, routes ...string) (jetstream.JetStream, *events.Resources) {
	t.Helper()
	ctx := context.Background()
	_, _, js := natstest.JetStream(t)
	res, err := events.Default.Setup(ctx, js, events.Options{})
	require.NoError(t, err)
	for _, r := range routes {
		_, err = events.EnsureConsumer(ctx, res.Checks, events.Default.PollerConsumerConfig(r, 0, 1, events.Options{}))
		require.NoError(t, err)
	}
	return js, res
}

func TestTake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, res := setup(t, "r")
	ns := events.Default
	_, err := events.EnsureConsumer(ctx, res.Intake, ns.IngestConsumerConfig("r", events.Options{}))
	require.NoError(t, err)
	b, err := budget.Ensure(ctx, js, ns, res.Slots, "r", events.SlotStatus, budget.Limit{Concurrency: 3}, events.Options{})
	require.NoError(t, err)
	lease, err := b.Acquire(ctx)
	require.NoError(t, err)
	defer lease.Release()

	owner := jobs.New(ns, js, res, jobs.Config{})
	for _, id := range []string{"a", "b", "c"} {
		_, created, err := owner.Intake().Accept(ctx, &state.Job{ID: id, Route: "r", RemoteID: "r-" + id, State: state.Queued, Tracked: true})
		require.NoError(t, err)
		require.True(t, created)
	}
	// Two jobs' checks parked (as a poller leaves them), one on another
	// route.
	for _, p := range [][2]string{{"r", "d"}, {"r", "e"}, {"other", "f"}} {
		_, err = js.Publish(ctx, ns.Parked(p[0], p[1]), []byte(`{"v":1}`), jetstream.WithScheduleAt(time.Now().Add(time.Hour)),
			jetstream.WithScheduleTarget(ns.Check(p[0], p[1])))
		require.NoError(t, err)
	}
	_, err = js.Publish(ctx, ns.Submit("r"), []byte(`{}`))
	require.NoError(t, err)
	pauses := route.NewPauses(res.Routes, zerolog.Nop())
	_, err = pauses.RateLimited(ctx, "r", time.Minute, "throttled")
	require.NoError(t, err)

	s, err := census.Take(ctx, ns, res, nil)
	require.NoError(t, err)
	require.Nil(t, s.Routes[0].Operator)
	_, err = pauses.PauseRoute(ctx, "r", time.Time{}, "alice", "maintenance")
	require.NoError(t, err)
	s, err = census.Take(ctx, ns, res, nil)
	require.NoError(t, err)
	require.NotNil(t, s.Routes[0].Operator, "an operator's pause without an end")
	require.Equal(t, "alice", s.Routes[0].Operator.By)
	_, _, err = pauses.ResumeRoute(ctx, "r")
	require.NoError(t, err)
	s, err = census.Take(ctx, ns, res, nil)
	require.NoError(t, err)
	require.Len(t, s.Routes, 1, "routes found from the pollers' consumers")
	require.Nil(t, s.Routes[0].Operator, "resumed")
	r := s.Routes[0]
	require.Equal(t, "r", r.Route)
	require.Equal(t, 5, r.Tracked, "three in the consumer, two parked")
	require.Equal(t, 2, r.Parked)
	require.Equal(t, 3, r.Backlog, "armed, not yet delivered")
	require.Equal(t, 1, r.Intake)
	require.Equal(t, census.Leases{Out: 1, Cap: 3}, r.Leases[events.SlotStatus])
	require.NotNil(t, r.Pause)
	require.Equal(t, route.PauseRateLimit, r.Pause.Kind)

	c := census.NewCollector(func(ctx context.Context) (*census.Snapshot, error) { return census.Take(ctx, ns, res, nil) },
		time.Hour, zerolog.Nop())
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- c.Run(cctx) }()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	require.Eventually(t, func() bool { n, _ := testutil.GatherAndCount(reg, "pollux_jobs_tracked"); return n == 1 },
		5*time.Second, 10*time.Millisecond)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP pollux_jobs_tracked Jobs being tracked (one check message each), by route.
# TYPE pollux_jobs_tracked gauge
pollux_jobs_tracked{route="r"} 5
# HELP pollux_route_paused 1 while a route is paused, by route and kind (rate_limit, auth, operator).
# TYPE pollux_route_paused gauge
pollux_route_paused{kind="auth",route="r"} 0
pollux_route_paused{kind="operator",route="r"} 0
pollux_route_paused{kind="rate_limit",route="r"} 1
`), "pollux_jobs_tracked", "pollux_route_paused"))
	cancel()
	require.NoError(t, <-done)
}

// The census shows the shared levels' leases and every level's running
// slots; with routes nil it finds them, whether or not a poller serves a
// route (as `pollux stats` takes it).
func TestTakeLevels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, res := setup(t, "r")
	ns := events.Default
	p := budget.NewPool(js, ns, res.Slots, events.Options{})
	defer p.Close()
	levels := []budget.Level{
		{Level: events.LevelAccount, Name: "acct", Submit: budget.Limit{Concurrency: 4}, Running: 3},
		{Level: events.LevelRoute, Name: "r", Running: 2},
	}
	_, err := p.Calls(ctx, levels, events.SlotSubmit)
	require.NoError(t, err)
	slots, err := p.Running(ctx, levels)
	require.NoError(t, err)
	_, full, err := slots.Take(ctx, "j1", nil)
	require.NoError(t, err)
	require.Nil(t, full)
	want := []census.Level{
		{Level: "account acct", Leases: map[string]census.Leases{"submit": {Out: 0, Cap: 4}}, Running: &census.Leases{Out: 1, Cap: 3}, Configured: 3},
		{Level: "route r", Leases: map[string]census.Leases{}, Running: &census.Leases{Out: 1, Cap: 2}, Configured: 2},
	}
	s, err := census.Take(ctx, ns, res, []string{}, census.Want{Scope: "account~acct", Running: true}, census.Want{Scope: "r", Running: true})
	require.NoError(t, err)
	require.Equal(t, want, s.Levels, "the scopes named")
	s, err = census.Take(ctx, ns, res, nil)
	require.NoError(t, err)
	require.Equal(t, want, s.Levels, "found from the streams")
	require.Empty(t, s.Rates, "no rate learned")

	// A learned rate in the limits bucket (what budget's learner writes).
	b, err := json.Marshal(budget.LearnedRate{Rate: 2.5, Ceiling: 3, Lowered: 1, Configured: 10, At: time.Now()})
	require.NoError(t, err)
	_, err = res.Limits.Put(ctx, events.LimitsKey("account~acct", events.SlotStatus), b)
	require.NoError(t, err)
	s, err = census.Take(ctx, ns, res, nil)
	require.NoError(t, err)
	require.Equal(t, []census.Rate{{Level: "account acct", Kind: "status", Rate: 2.5, Configured: 10, Lowered: 1}}, s.Rates)
}

// An app's running and waiting slots are levels an operator's census
// finds too.
func TestTakeFindsAppLevels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, res := setup(t, "r")
	ns := events.Default
	apps := budget.NewApps(js, ns, events.Options{}, map[string]budget.AppCap{"studio": {Running: 3, Waiting: 5}})
	r, err := apps.Running(ctx, "studio")
	require.NoError(t, err)
	_, full, err := budget.Slots{r}.Take(ctx, "j1", nil)
	require.NoError(t, err)
	require.Nil(t, full)
	require.NoError(t, apps.Wait(ctx, "studio", "j2"))
	s, err := census.Take(ctx, ns, res, nil)
	require.NoError(t, err)
	require.Equal(t, []census.Level{
		{Level: "app studio", Leases: map[string]census.Leases{}, Running: &census.Leases{Out: 1, Cap: 3}, Configured: 3},
		{Level: "app_waiting studio", Leases: map[string]census.Leases{}, Running: &census.Leases{Out: 1, Cap: 5}, Configured: 5},
	}, s.Levels)
}

// The oldest unresolved job is found in the events, not the checks: jobs
// a, b, c submitted 3, 2 and 1 hours ago by their writer's clock (their
// checks are minutes old), then a ends, then c: each take names the
// first job still open, and 0 once none is. A census started afresh (its
// cursor gone) finds the same.
func TestOldestUnresolvedFollowsTheJobsNotTheirChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, res := setup(t)
	ns := events.Default
	var clock time.Time
	owner := jobs.New(ns, js, res, jobs.Config{Now: func() time.Time { return clock }})
	since := map[string]time.Time{}
	track := func(id string) {
		t.Helper()
		j := &state.Job{ID: id, Route: "r", RemoteID: "r-" + id, State: state.Queued, Tracked: true}
		j.Record(events.EventSubmitted, clock)
		_, _, err := owner.Intake().Accept(ctx, j)
		require.NoError(t, err)
		since[id] = firstEvent(t, js, ns, id).Time
	}
	for i, id := range []string{"a", "b", "c"} {
		clock = time.Now().Add(time.Duration(i-3) * time.Hour)
		track(id)
	}
	clock = time.Now()
	oldest := func() time.Duration {
		t.Helper()
		s, err := census.Take(ctx, ns, res, []string{"r"})
		require.NoError(t, err)
		return time.Duration(s.Routes[0].Oldest)
	}
	// The age is taken at Take's start: between the times around it.
	requireAge := func(id string) {
		t.Helper()
		before := time.Since(since[id])
		got := oldest()
		require.GreaterOrEqual(t, got, before-time.Millisecond, "job %s", id)
		require.LessOrEqual(t, got, time.Since(since[id]), "job %s", id)
	}
	requireAge("a")
	end := func(id string, s state.State) {
		t.Helper()
		r, err := owner.Intake().Read(ctx, id)
		require.NoError(t, err)
		_, err = owner.Intake().End(ctx, r, state.Observation{State: s}, jobs.Always)
		require.NoError(t, err)
	}
	requireAge("a")
	end("a", state.Succeeded)
	requireAge("b")
	end("c", state.Failed)
	requireAge("b")

	// A fresh census (cursor gone) walks the history again.
	require.NoError(t, res.Routes.Delete(ctx, events.UnresolvedKey("r")))
	requireAge("b")
	end("b", state.Canceled)
	require.Zero(t, oldest(), "nothing unresolved")
	require.Zero(t, oldest(), "and still nothing")

	// A job submitted later is found from where the cursor stopped.
	clock = time.Now().Add(-time.Minute)
	track("d")
	requireAge("d")
}

// firstEvent is job id's first event on route r.
func firstEvent(t *testing.T, js jetstream.JetStream, ns events.Namespace, id string) *events.Event {
	t.Helper()
	s, err := js.Stream(context.Background(), ns.EventsStream())
	require.NoError(t, err)
	m, err := s.GetMsg(context.Background(), 1, jetstream.WithGetMsgSubject(ns.Event("r", id)))
	require.NoError(t, err)
	ev, err := events.DecodeEvent(m.Data)
	require.NoError(t, err)
	require.Equal(t, uint64(1), ev.Seq)
	return ev
}

// A walk that stops at its budget keeps its place, reporting the age of
// the event it reached — an event no later than the oldest open job's, so
// more than the true age, never less — and the next takes go on from there
// to that job. (Not parallel: it sets the package's walk budget.)
func TestABudgetedWalkOverstatesThenCatchesUp(t *testing.T) {
	defer census.SetWalkBudget(2)()
	ctx := context.Background()
	js, res := setup(t)
	ns := events.Default
	owner := jobs.New(ns, js, res, jobs.Config{})
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		j := &state.Job{ID: id, Route: "r", RemoteID: "r-" + id, State: state.Queued, Tracked: true}
		j.Record(events.EventSubmitted, time.Now())
		_, _, err := owner.Intake().Accept(ctx, j)
		require.NoError(t, err)
		if id != "e" {
			r, err := owner.Intake().Read(ctx, id)
			require.NoError(t, err)
			_, err = owner.Intake().End(ctx, r, state.Observation{State: state.Succeeded}, jobs.Always)
			require.NoError(t, err)
		}
	}
	stream, err := js.Stream(ctx, ns.EventsStream())
	require.NoError(t, err)
	eFirst, err := stream.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(ns.Event("r", "e")))
	require.NoError(t, err)
	cursor := func() census.Unresolved {
		t.Helper()
		e, err := res.Routes.Get(ctx, events.UnresolvedKey("r"))
		require.NoError(t, err)
		var u census.Unresolved
		require.NoError(t, json.Unmarshal(e.Value(), &u))
		return u
	}

	takes := 0
	for ; takes < 10; takes++ {
		before := time.Now()
		s, err := census.Take(ctx, ns, res, []string{"r"})
		require.NoError(t, err)
		u := cursor()
		if u.Job == "e" {
			break
		}
		require.True(t, u.Behind, "take %d stopped short of the stream's end", takes)
		require.LessOrEqual(t, u.Seq, eFirst.Sequence, "take %d: e not read yet", takes)
		require.False(t, u.Since.After(eFirst.Time), "take %d: the event reached is no later than e's", takes)
		require.GreaterOrEqual(t, time.Duration(s.Routes[0].Oldest), before.Sub(eFirst.Time), "take %d: never less than e's age", takes)
	}
	require.Positive(t, takes, "two events a take: the first take stops short of e")
	require.Less(t, takes, 10, "the takes reach e")
	require.Equal(t, eFirst.Sequence, cursor().Seq)
}

// A route with many parked checks is counted from one slot, so a census
// does not walk (and hold) the checks stream's whole subject index: with
// 80,001 parked the count is the first slot's times the slots, within a
// few percent; below the threshold it is exact.
func TestManyParkedChecksAreCountedFromOneSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, res := setup(t, "big", "small")
	ns := events.Default
	park := func(route string, n int) {
		natstest.PublishMany(t, js, n, func(i int) (string, []byte) {
			return ns.Parked(route, fmt.Sprintf("job-%06d", i)), []byte(`{"v":1}`)
		})
	}
	park("big", 80_001)
	park("small", 3_000)

	s, err := census.Take(ctx, ns, res, nil)
	require.NoError(t, err)
	parked := map[string]int{}
	for _, r := range s.Routes {
		parked[r.Route] = r.Parked
	}
	require.Equal(t, 3_000, parked["small"], "exact below the threshold")
	require.Zero(t, parked["big"]%events.CheckSlots, "estimated from one slot")
	require.InEpsilon(t, 80_001, parked["big"], 0.1)
}
