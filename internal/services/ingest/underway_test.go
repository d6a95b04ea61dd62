package ingest_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/ingest"
	"github.com/pollux-dev/pollux/internal/testkit/stack"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

// held is a fake whose creates wait for the test to let them answer.
type held struct {
	*fake
	entered chan struct{}
	answer  chan struct{}
}

func (h held) Submit(ctx context.Context, req provider.SubmitRequest) (provider.Status, error) {
	h.entered <- struct{}{}
	<-h.answer
	return h.fake.Submit(ctx, req)
}

// A create answered while NATS is away, for longer than the intake's ack
// wait: the submission comes again once NATS is back, while the handling
// that holds the answer is still retrying its write. The redelivery must
// not take the create for one in doubt: at a provider that can neither
// find the job nor deduplicate a retry, that would give the job up as
// lost while the provider runs it. Red without the process's jobs under
// way (underway.go): the redelivery, past the attempt's call (the clock
// has moved on), would have the job lost.
func TestARedeliveryWaitsForTheAnswerItsProcessHolds(t *testing.T) {
	t.Parallel()
	u := underway(t, true)
	f, s, r := u.f, u.Stack, u.rig
	r.submit("w")
	<-f.entered
	// NATS goes away while the provider answers; by the time it is back
	// the attempt's call is long over.
	s.NATS.Stop()
	u.later.Store(int64(time.Minute))
	u.release()
	<-time.After(3 * time.Second) // down for three ack waits
	s.NATS.Start(t)

	j := s.Until("w", func(j *state.Job) bool { return j.State.Terminal() || submitted(j) })
	require.Equal(t, state.Queued, j.State, "the answer in hand is recorded: %s", j.Reason)
	require.Equal(t, "rem-w-0", j.RemoteID)
	r.intakeDone()
	require.Equal(t, 1, f.createsOf("w"), "one create")
	t.Logf("deliveries that found the job under way: %d", u.busy.Load())
}

// Another process of the fleet held a create's answer while NATS was
// away: once NATS is back, this process, redelivered the submission, must
// not give the job up before that process has had time to land its
// write. Red without the reconnect grace (resolve): the job is lost at
// once, and the answer that lands after it only keeps its remote id.
func TestADoubtWaitsForAnotherProcessAfterAReconnect(t *testing.T) {
	t.Parallel()
	f := newFake()
	s := stack.New(t, stack.Config{
		Restartable: true,
		Pollux:      &config.Config{Routes: map[string]config.Route{"fake": {}}},
		Adapters:    map[string]provider.Adapter{"fake": f},
	})
	handled := new(atomic.Int64)
	cfg := ingest.Config{Routes: s.Routes, Options: s.Options}
	cfg.Metrics.Submission = func(_, _, _ string) { handled.Add(1) }
	svc, err := ingest.New(cfg, s.JS, s.NS, s.Res, s.Jobs.Intake(), s.Gates(route.GateConfig{CallTimeout: time.Second}))
	require.NoError(t, err)
	s.Go(svc.Run)

	require.Eventually(t, func() bool {
		// Set up and fetching: a restart during the setup's own calls
		// would leave them waiting out their timeout.
		c, err := s.Res.Intake.Consumer(t.Context(), "ingest-fake")
		return err == nil && c.CachedInfo().NumWaiting > 0
	}, 20*time.Second, 10*time.Millisecond, "ingest consumes the route")

	// Process A made its attempt long ago; then NATS went away and came
	// back.
	s.NATS.Restart(t, 500*time.Millisecond)
	require.Eventually(t, func() bool { return s.NC.IsConnected() }, 20*time.Second, 10*time.Millisecond)
	j := &state.Job{ID: "a", Route: "fake", Model: "m", State: state.Pending, IdempotencyKey: "key-a", IntakeSeq: 1,
		CreatedAt: time.Now().Add(-time.Hour).UTC(), AttemptedAt: time.Now().Add(-time.Hour).UTC(), SubmitAttempts: 1, SubmitInDoubt: true, AttemptID: "process-a"}
	rec, created, err := s.Jobs.Intake().Accept(t.Context(), j)
	require.NoError(t, err)
	require.True(t, created)
	// Its submission, redelivered here.
	r := &rig{Stack: s, t: t}
	r.submit("a")
	require.Eventually(t, func() bool { return handled.Load() > 0 }, 20*time.Second, 10*time.Millisecond, "this process took up the doubt")
	require.False(t, s.Job("a").State.Terminal(), "given up while process A may hold the answer: %s", s.Job("a").Reason)

	// A lands the answer it held.
	got, err := s.Jobs.Intake().Submitted(t.Context(), rec, jobs.Created{RemoteID: "rem-a", Due: time.Now().Add(time.Hour),
		Obs: state.Observation{State: state.Queued, Source: state.FromSubmit, At: time.Now().UTC()}})
	require.NoError(t, err)
	require.Equal(t, state.Queued, got.State)
	require.Equal(t, "rem-a", got.RemoteID)
	require.Zero(t, f.createsOf("a"), "never created here")
}

// JetStream can be away while the connection stays up (a stream leader
// election in a cluster): the handling that holds a create's answer
// retries its write for longer than the call's timeout and margin, and
// the submission comes again meanwhile — no reconnect, so no reconnect
// grace — here because its InProgress no longer keeps it (the consumer's
// ack wait is cut below the keeper's interval). The redelivery must come
// back later ("busy"), not take the create for one in doubt. Red without
// the process's jobs under way (underway.go): the redelivery, its clock
// past the attempt's call and margin, has the job lost while the provider
// runs it.
func TestARedeliveryWithNATSUpWaitsForTheHandling(t *testing.T) {
	t.Parallel()
	u := underway(t, false)
	f, s, r := u.f, u.Stack, u.rig
	r.submit("w")
	<-f.entered
	// The call is long over, as far as a redelivery can tell, and the
	// message is no longer kept.
	u.later.Store(int64(time.Minute))
	c, err := s.Res.Intake.Consumer(t.Context(), s.NS.IngestConsumer("fake"))
	require.NoError(t, err)
	short := c.CachedInfo().Config
	short.AckWait = 100 * time.Millisecond
	_, err = s.Res.Intake.UpdateConsumer(t.Context(), short)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return u.busy.Load() > 0 }, 20*time.Second, 10*time.Millisecond,
		"the submission comes again while its handling holds the answer")
	u.release()

	j := s.Until("w", func(j *state.Job) bool { return j.State.Terminal() || submitted(j) })
	require.Equal(t, state.Queued, j.State, "the answer in hand is recorded: %s", j.Reason)
	require.Equal(t, 1, f.createsOf("w"), "one create")
}

// underwayRig is one ingest process over a fake whose creates wait for
// the test (held), its clock ahead by later, counting the deliveries that
// found their job under way (busy); on a restartable server when asked.
type underwayRig struct {
	*rig
	f       held
	later   *atomic.Int64
	busy    *atomic.Int64
	release func() // lets the creates answer; done at the latest when the test ends
}

func underway(t *testing.T, restartable bool) underwayRig {
	t.Helper()
	f := held{fake: newFake(), entered: make(chan struct{}, 4), answer: make(chan struct{})}
	s := stack.New(t, stack.Config{
		Restartable: restartable,
		Pollux: &config.Config{
			Streams: config.Streams{IntakeAckWait: time.Second},
			Routes:  map[string]config.Route{"fake": {}},
		},
		Adapters: map[string]provider.Adapter{"fake": f},
	})
	u := underwayRig{rig: &rig{Stack: s, t: t}, f: f, later: new(atomic.Int64), busy: new(atomic.Int64),
		release: sync.OnceFunc(func() { close(f.answer) })}
	t.Cleanup(u.release) // before the stack stops: the creates return
	now := func() time.Time { return time.Now().Add(time.Duration(u.later.Load())) }
	cfg := ingest.Config{Routes: s.Routes, Options: s.Options, Now: now}
	cfg.Metrics.Submission = func(_, _, result string) {
		if result == "busy" {
			u.busy.Add(1)
		}
	}
	svc, err := ingest.New(cfg, s.JS, s.NS, s.Res, s.Jobs.Intake(), s.Gates(route.GateConfig{CallTimeout: 5 * time.Second}))
	require.NoError(t, err)
	s.Go(svc.Run)
	return u
}
