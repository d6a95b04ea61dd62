package poller_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/poller"
	"github.com/pollux-dev/pollux/internal/testkit/stack"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script is a provider whose every job answers the same scripted run of
// statuses, one per call (the last one repeats), and counts the calls.
type script struct {
	steps []step
	mu    sync.Mutex
	calls map[string]int
}

type step struct {
	state state.State
	raw   string
	err   error
	pos   int // the queue position reported; 0 for none
}

func (s *script) Info() provider.Info { return provider.Info{Kind: "script", Idempotent: true} }

func (s *script) Submit(context.Context, provider.SubmitRequest) (provider.Status, error) {
	return provider.Status{}, errors.New("not used")
}

func (s *script) Cancel(context.Context, provider.Ref) (provider.Status, error) {
	return provider.Status{}, errors.New("not used")
}

func (s *script) Status(_ context.Context, ref provider.Ref) (provider.Status, error) {
	s.mu.Lock()
	n := s.calls[ref.ID]
	s.calls[ref.ID] = n + 1
	s.mu.Unlock()
	st := s.steps[min(n, len(s.steps)-1)]
	if st.err != nil {
		return provider.Status{}, st.err
	}
	o := state.Observation{State: st.state, Raw: st.raw}
	if st.pos > 0 {
		o.QueuePosition = &st.pos
	}
	return provider.Status{Observation: o}, nil
}

func (s *script) callsOf(remote string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[remote]
}

// fleet is a route served by a scripted provider, with its jobs tracked,
// on a stack (internal/testkit/stack).
type fleet struct {
	*stack.Stack
	t *testing.T
}

func newFleet(t *testing.T, prefix string, sc *script, rc config.Route) *fleet {
	t.Helper()
	return &fleet{t: t, Stack: stack.New(t, stack.Config{
		Pollux:   &config.Config{Prefix: prefix, Routes: map[string]config.Route{"script": rc}},
		Adapters: map[string]provider.Adapter{"script": sc},
	})}
}

// track tracks n jobs, each due now.
func (f *fleet) track(n int) {
	f.t.Helper()
	now := time.Now().UTC()
	for i := range n {
		j := &state.Job{ID: fmt.Sprintf("job-%02d", i), Route: "script", Model: "m", RemoteID: fmt.Sprintf("r-%02d", i),
			State: state.Queued, ProviderStatus: "starting", Tracked: true, CreatedAt: now, SubmittedAt: now, NextCheckAt: now}
		j.Record(events.EventSubmitted, now)
		f.Accept(j)
	}
}

// poll runs k pollers until the test ends.
func (f *fleet) poll(k int) {
	f.t.Helper()
	for range k {
		po, err := poller.New(poller.Config{Routes: f.Routes, Options: f.Options}, f.JS, f.NS, f.Res, f.Jobs.Polls(), f.Gates(route.GateConfig{}))
		require.NoError(f.t, err)
		f.Go(po.Run)
	}
}

func (f *fleet) job(i int) *state.Job {
	f.t.Helper()
	return f.Job(fmt.Sprintf("job-%02d", i))
}

func (f *fleet) waitTerminal(n int) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		for i := range n {
			if !f.job(i).State.Terminal() {
				return false
			}
		}
		return true
	}, 45*time.Second, 50*time.Millisecond)
}

// TestQuietPollsWriteNothing: a poll that learns nothing touches no KV (the
// check carries the job's poll state), a poll that learns something
// writes the record once and replaces the check, and the record's poll
// count comes out exact — across two processes sharing the consumer and
// through a route pause — because it is counted by the checks' deliveries.
func TestQuietPollsWriteNothing(t *testing.T) {
	t.Parallel()
	limited := &provider.Error{Class: provider.RateLimited, HTTPStatus: 429, RetryAfter: 300 * time.Millisecond}
	sc := &script{calls: map[string]int{}, steps: []step{
		{state: state.Queued, raw: "starting"}, {state: state.Queued, raw: "starting"}, {state: state.Queued, raw: "starting"},
		{state: state.Running, raw: "processing"}, {state: state.Running, raw: "processing"},
		{err: limited}, // pauses the whole route: other jobs' checks are postponed
		{state: state.Running, raw: "processing"}, {state: state.Running, raw: "processing"}, {state: state.Running, raw: "processing"},
		{state: state.Succeeded, raw: "succeeded"},
	}}
	f := newFleet(t, "quiet", sc, config.Route{Workers: config.Workers{Status: 8},
		Poll: config.Poll{MinDelay: 20 * time.Millisecond, MaxDelay: 20 * time.Millisecond}})
	const n = 20
	f.track(n)

	// Count the writes of every job record.
	writes := map[string]int{}
	var wmu sync.Mutex
	w, err := f.Res.Jobs.WatchAll(f.Ctx(), jetstream.UpdatesOnly())
	require.NoError(t, err)
	defer func() { _ = w.Stop() }()
	go func() {
		for e := range w.Updates() {
			if e != nil {
				wmu.Lock()
				writes[e.Key()]++
				wmu.Unlock()
			}
		}
	}()

	f.poll(2) // two pollers share the route's consumer, as two processes would
	f.waitTerminal(n)
	for i := range n {
		j := f.job(i)
		require.Equal(t, state.Succeeded, j.State)
		require.Equal(t, state.FromPoll, j.DetectedBy)
		require.Equal(t, sc.callsOf(j.RemoteID), j.Polls, "job %s: the record counts every status call", j.ID)
		wmu.Lock()
		got := writes[j.ID]
		wmu.Unlock()
		// queued → running, the 429, succeeded: a write each; the
		// quiet polls none.
		require.LessOrEqual(t, got, 3, "job %s: %d writes for %d polls", j.ID, got, j.Polls)
	}
}

// A check without poll state (armed by hand, or by an older Pollux)
// reads the record, and its first poll replaces it with one that carries
// the state.
func TestCheckWithoutPollStateGainsOne(t *testing.T) {
	t.Parallel()
	sc := &script{calls: map[string]int{}, steps: []step{{state: state.Running, raw: "processing"}}}
	f := newFleet(t, "legacy", sc, config.Route{Poll: config.Poll{MinDelay: time.Minute, MaxDelay: time.Minute}})
	f.track(1)
	ctx := context.Background()
	v, err := f.Jobs.Check(ctx, "script", "job-00")
	require.NoError(t, err)
	require.NoError(t, f.Res.Checks.DeleteMsg(ctx, v.Seq))
	_, err = f.JS.Publish(ctx, f.NS.Check("script", "job-00"), []byte(`{"v":1,"job_id":"job-00"}`))
	require.NoError(t, err)

	f.poll(1)
	require.Eventually(t, func() bool {
		v, err := f.Jobs.Check(ctx, "script", "job-00")
		return err == nil && v.Check != nil && v.Check.Poll != nil
	}, 20*time.Second, 20*time.Millisecond, "the first poll gives the check its poll state")
	v, err = f.Jobs.Check(ctx, "script", "job-00")
	require.NoError(t, err)
	require.Equal(t, 1, v.Check.Poll.Polls)
	require.Equal(t, "r-00", v.Check.Poll.RemoteID)
	require.True(t, v.Check.Due.After(time.Now().Add(30*time.Second)), "due one interval after the poll")
	require.Equal(t, 1, f.job(0).Polls)
	require.Equal(t, 1, sc.callsOf("r-00"))
}

// A status call the provider refuses as invalid (400, 422) is confirmed
// by the next one, and then the job fails with the provider's reason
// instead of being retried until its deadline.
func TestARefusedStatusCallFailsTheJobOnceConfirmed(t *testing.T) {
	t.Parallel()
	refused := &provider.Error{Class: provider.Invalid, HTTPStatus: 422, Message: "prediction id is malformed"}
	sc := &script{calls: map[string]int{}, steps: []step{{err: refused}}}
	f := newFleet(t, "refused", sc, config.Route{Poll: config.Poll{MinDelay: 20 * time.Millisecond, ErrorBase: 20 * time.Millisecond}})
	f.track(1)
	f.poll(1)
	f.waitTerminal(1)
	j := f.job(0)
	require.Equal(t, state.Failed, j.State)
	require.Contains(t, j.Reason, "prediction id is malformed")
	require.Equal(t, 2, j.Polls, "confirmed once, then failed")
	require.Equal(t, 2, sc.callsOf("r-00"))
}

// Refused credentials on a status call pause the route for the whole
// fleet, fail no job, and the route resumes when the credentials work
// again.
func TestAuthFailurePausesTheRouteAndFailsNoJob(t *testing.T) {
	t.Parallel()
	denied := &provider.Error{Class: provider.Auth, HTTPStatus: 401, Message: "invalid token"}
	sc := &script{calls: map[string]int{}, steps: []step{{err: denied}, {state: state.Succeeded, raw: "succeeded"}}}
	f := newFleet(t, "auth", sc, config.Route{Poll: config.Poll{MinDelay: 20 * time.Millisecond, MaxDelay: 20 * time.Millisecond}})
	f.Pauses.AuthBase = time.Second // 30 s in production
	f.track(1)
	f.poll(1)
	require.Eventually(t, func() bool { _, ok := f.Pauses.Active("script"); return ok }, 20*time.Second, 10*time.Millisecond,
		"the route is paused")
	ps, _ := f.Pauses.Active("script")
	require.Equal(t, route.PauseAuth, ps.Kind)
	require.Equal(t, 1, ps.Strikes)
	require.False(t, f.job(0).State.Terminal(), "no job is failed for it")
	f.waitTerminal(1) // the pause ends and the route resumes
	j := f.job(0)
	require.Equal(t, state.Succeeded, j.State)
	require.Equal(t, 2, j.Polls)
	require.Zero(t, j.Errors, "an auth failure is the route's, not the job's")
}

// A poller whose second route cannot start returns with nothing of the
// first left running (goleak checks at the end of the package).
func TestRunFailingOnASecondRouteLeavesNothingRunning(t *testing.T) {
	t.Parallel()
	sc := &script{calls: map[string]int{}, steps: []step{{state: state.Running, raw: "processing"}}}
	f := newFleet(t, "second", sc, config.Route{})
	bad, err := route.New("broken", sc, config.Route{Partitions: 2}, 1)
	require.NoError(t, err)
	routes := map[string]*route.Route{"script": f.Routes["script"], "broken": bad}
	// The broken route's partitions overlap a consumer already there.
	_, err = events.EnsureConsumer(f.Ctx(), f.Res.Checks, jetstream.ConsumerConfig{
		Durable: "squatter", FilterSubject: f.NS.Checks("broken"), AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	po, err := poller.New(poller.Config{Routes: routes, Options: f.Options}, f.JS, f.NS, f.Res, f.Jobs.Polls(), f.Gates(route.GateConfig{}))
	require.NoError(t, err)
	require.Error(t, po.Run(f.Ctx()))
}

// Every poll of a queued job tells the fleet's queue velocity how far it
// moved since the poll before, a move of zero included, and its start
// counts as moving the rest of the way; the learned rate comes back as
// the schedule's hint.
func TestQueuedJobsTeachTheQueuesVelocity(t *testing.T) {
	t.Parallel()
	sc := &script{calls: map[string]int{}, steps: []step{
		{state: state.Queued, raw: "queued", pos: 9}, {state: state.Queued, raw: "queued", pos: 9},
		{state: state.Queued, raw: "queued", pos: 4}, {state: state.Running, raw: "processing"},
		{state: state.Succeeded, raw: "succeeded"},
	}}
	f := newFleet(t, "queue", sc, config.Route{Poll: config.Poll{MinDelay: 20 * time.Millisecond, MaxDelay: 20 * time.Millisecond}})
	var mu sync.Mutex
	var moved []float64
	var asked int
	po, err := poller.New(poller.Config{Routes: f.Routes, Options: f.Options,
		Queue: func(route string, m float64, elapsed time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, "script", route)
			require.Positive(t, elapsed)
			moved = append(moved, m)
		},
		QueueRate: func(string) float64 {
			mu.Lock()
			defer mu.Unlock()
			asked++
			return 0.5
		},
	}, f.JS, f.NS, f.Res, f.Jobs.Polls(), f.Gates(route.GateConfig{}))
	require.NoError(t, err)
	f.track(1) // tracked queued, with no place known yet
	f.Go(po.Run)
	f.waitTerminal(1)
	mu.Lock()
	defer mu.Unlock()
	// 9 (no place before) · 9 → 9: 0 · 9 → 4: 5 · 4 → running: 4 · done:
	// no place before.
	require.Equal(t, []float64{0, 5, 4}, moved)
	require.Positive(t, asked, "the learned rate is asked while the job has a place")
}
