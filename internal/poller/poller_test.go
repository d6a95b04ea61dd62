package poller_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/app"
	"github.com/pollux-dev/pollux/internal/config"
	"github.com/pollux-dev/pollux/internal/lifecycle"
	"github.com/pollux-dev/pollux/internal/metrics"
	"github.com/pollux-dev/pollux/internal/natstest"
	"github.com/pollux-dev/pollux/internal/poller"
	"github.com/pollux-dev/pollux/internal/route"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

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
	return provider.Status{Observation: state.Observation{State: st.state, Raw: st.raw}}, nil
}

func (s *script) callsOf(remote string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[remote]
}

// TestQuietPollsWriteNothing: a poll that learns nothing touches no KV (the
// check carries the job's poll context), a poll that learns something
// writes the record and replaces the check, and the record's poll count
// comes out exact — across two processes sharing the consumer and through
// a route pause — because it is counted by the checks' deliveries.
func TestQuietPollsWriteNothing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, nc, _ := natstest.JetStream(t)

	limited := &provider.Error{Class: provider.RateLimited, HTTPStatus: 429, RetryAfter: 300 * time.Millisecond}
	sc := &script{calls: map[string]int{}, steps: []step{
		{state: state.Queued, raw: "starting"}, {state: state.Queued, raw: "starting"}, {state: state.Queued, raw: "starting"},
		{state: state.Running, raw: "processing"}, {state: state.Running, raw: "processing"},
		{err: limited}, // pauses the whole route: other jobs' checks are postponed
		{state: state.Running, raw: "processing"}, {state: state.Running, raw: "processing"}, {state: state.Running, raw: "processing"},
		{state: state.Succeeded, raw: "succeeded"},
	}}
	rc := config.Route{Workers: config.Workers{Status: 8}, Poll: config.Poll{MinDelay: 20 * time.Millisecond, MaxDelay: 20 * time.Millisecond}}
	rt, err := route.New("script", sc, rc, 1)
	require.NoError(t, err)
	g, gctx := errgroup.WithContext(ctx)
	env, err := app.Open(gctx, g, &config.Config{Prefix: "quiet", Routes: map[string]config.Route{"script": rc}}, nc,
		map[string]*route.Route{"script": rt}, metrics.New(), zerolog.Nop())
	require.NoError(t, err)

	const jobs = 20
	now := time.Now().UTC()
	for i := range jobs {
		j := &state.Job{ID: fmt.Sprintf("job-%02d", i), Route: "script", Model: "m", RemoteID: fmt.Sprintf("r-%02d", i),
			State: state.Queued, ProviderStatus: "starting", CreatedAt: now, SubmittedAt: now, UpdatedAt: now}
		require.NoError(t, env.Life.Create(ctx, j))
		require.NoError(t, env.Life.Arm(ctx, j, now))
	}

	// Count the writes of every job record.
	writes := map[string]int{}
	var wmu sync.Mutex
	w, err := env.Res.Jobs.WatchAll(ctx, jetstream.UpdatesOnly())
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

	// Two pollers share the route's consumer, as two processes would.
	pctx, stop := context.WithCancel(gctx)
	var pollers errgroup.Group
	for range 2 {
		po, err := poller.New(poller.Config{Routes: env.Routes, Options: env.Options()}, env.JS, env.NS, env.Res, env.Life, env.Pauses)
		require.NoError(t, err)
		pollers.Go(func() error { return po.Run(pctx) })
	}
	require.Eventually(t, func() bool {
		for i := range jobs {
			j, _, err := env.Life.Store().Get(ctx, fmt.Sprintf("job-%02d", i))
			if err != nil || !j.State.Terminal() {
				return false
			}
		}
		return true
	}, 45*time.Second, 50*time.Millisecond)
	stop()
	require.NoError(t, pollers.Wait())

	for i := range jobs {
		j, _, err := env.Life.Store().Get(ctx, fmt.Sprintf("job-%02d", i))
		require.NoError(t, err)
		require.Equal(t, state.Succeeded, j.State)
		require.Equal(t, state.FromPoll, j.DetectedBy)
		require.Equal(t, sc.callsOf(j.RemoteID), j.Polls, "job %s: the record counts every status call", j.ID)
		wmu.Lock()
		n := writes[j.ID]
		wmu.Unlock()
		// queued → running, the 429 and its recovery, succeeded: each a
		// write and an outbox clear at most; the quiet polls none.
		require.LessOrEqual(t, n, 8, "job %s: %d writes for %d polls", j.ID, n, j.Polls)
	}
	cancel()
	_ = g.Wait()
}

// CountPolls replays the route's schedule from the check's not-before: with
// polls every second, a check armed 4.5 s ago has made five polls on top of
// the two its context counts.
func TestCountPollsReplaysTheSchedule(t *testing.T) {
	t.Parallel()
	rc := config.Route{Poll: config.Poll{MinDelay: time.Second, MaxDelay: time.Second}}
	rt, err := route.New("script", &script{calls: map[string]int{}}, rc, 1)
	require.NoError(t, err)

	armed := time.Now().UTC().Add(-time.Hour)
	j := &state.Job{ID: "job-1", Route: "script", Model: "m", RemoteID: "r-1", State: state.Running,
		CreatedAt: armed, SubmittedAt: armed, UpdatedAt: armed, Polls: 2, Unchanged: 1}
	polls, unchanged, ok := poller.CountPolls(rt, nil, &lifecycle.Seen{}, armed)
	require.False(t, ok, "no check, no count")
	require.Zero(t, polls+unchanged)

	chk := events.NewCheck(j, armed)
	seen := &lifecycle.Seen{Check: &chk, Seq: 7, Published: armed}
	polls, unchanged, ok = poller.CountPolls(rt, nil, seen, armed.Add(4500*time.Millisecond))
	require.True(t, ok)
	require.Equal(t, 2+5, polls)
	require.Equal(t, 1+5, unchanged)
	polls, _, _ = poller.CountPolls(rt, nil, seen, armed.Add(-time.Second))
	require.Equal(t, 2, polls, "not due yet: only the context's polls")
}

// A check without a poll context (armed by hand, or by an older Pollux)
// reads the record, and its first poll replaces it with one that carries
// the context.
func TestCheckWithoutContextGainsOne(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, nc, _ := natstest.JetStream(t)
	sc := &script{calls: map[string]int{}, steps: []step{{state: state.Running, raw: "processing"}}}
	rc := config.Route{Poll: config.Poll{MinDelay: time.Minute, MaxDelay: time.Minute}}
	rt, err := route.New("script", sc, rc, 1)
	require.NoError(t, err)
	g, gctx := errgroup.WithContext(ctx)
	env, err := app.Open(gctx, g, &config.Config{Prefix: "legacy", Routes: map[string]config.Route{"script": rc}}, nc,
		map[string]*route.Route{"script": rt}, metrics.New(), zerolog.Nop())
	require.NoError(t, err)

	now := time.Now().UTC()
	j := &state.Job{ID: "job-1", Route: "script", Model: "m", RemoteID: "r-1", State: state.Running,
		ProviderStatus: "processing", CreatedAt: now, SubmittedAt: now, UpdatedAt: now}
	require.NoError(t, env.Life.Create(ctx, j))
	_, err = env.JS.Publish(ctx, env.NS.Check("script", "job-1"), []byte(`{"v":1,"job_id":"job-1"}`))
	require.NoError(t, err)

	po, err := poller.New(poller.Config{Routes: env.Routes, Options: env.Options()}, env.JS, env.NS, env.Res, env.Life, env.Pauses)
	require.NoError(t, err)
	pctx, stop := context.WithCancel(gctx)
	done := make(chan error, 1)
	go func() { done <- po.Run(pctx) }()
	require.Eventually(t, func() bool {
		seen, err := env.Life.CurrentCheck(ctx, "script", "job-1")
		return err == nil && seen.Check != nil && seen.Check.Job != nil
	}, 20*time.Second, 20*time.Millisecond, "the first poll gives the check its context")
	stop()
	require.NoError(t, <-done)

	seen, err := env.Life.CurrentCheck(ctx, "script", "job-1")
	require.NoError(t, err)
	chk := seen.Check
	require.Equal(t, 1, chk.Job.Polls)
	require.Equal(t, "r-1", chk.Job.RemoteID)
	require.True(t, chk.NotBefore.After(now), "due one interval after the poll")
	rec, _, err := env.Life.Store().Get(ctx, "job-1")
	require.NoError(t, err)
	require.Equal(t, 1, rec.Polls)
	require.Equal(t, 1, sc.callsOf("r-1"))
	cancel()
	_ = g.Wait()
}
