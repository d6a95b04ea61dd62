package ingest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	f := held{fake: newFake(), entered: make(chan struct{}, 4), answer: make(chan struct{})}
	s := stack.New(t, stack.Config{
		Restartable: true,
		Pollux: &config.Config{
			Streams: config.Streams{IntakeAckWait: time.Second},
			Routes:  map[string]config.Route{"fake": {}},
		},
		Adapters: map[string]provider.Adapter{"fake": f},
	})
	var later atomic.Int64 // how far the service's clock is ahead
	now := func() time.Time { return time.Now().Add(time.Duration(later.Load())) }
	busy := new(atomic.Int64)
	cfg := ingest.Config{Routes: s.Routes, Options: s.Options, CallTimeout: 5 * time.Second, Now: now}
	cfg.Metrics.Submission = func(_, _, result string) {
		if result == "busy" {
			busy.Add(1)
		}
	}
	svc, err := ingest.New(cfg, s.JS, s.NS, s.Res, s.Jobs.Intake(), s.Pauses)
	require.NoError(t, err)
	s.Go(svc.Run)

	r := &rig{Stack: s, t: t}
	r.submit("w")
	<-f.entered
	// NATS goes away while the provider answers; by the time it is back
	// the attempt's call is long over.
	s.NATS.Stop()
	later.Store(int64(time.Minute))
	close(f.answer)
	<-time.After(3 * time.Second) // down for three ack waits
	s.NATS.Start(t)

	j := s.Until("w", func(j *state.Job) bool { return j.State.Terminal() || submitted(j) })
	require.Equal(t, state.Queued, j.State, "the answer in hand is recorded: %s", j.Reason)
	require.Equal(t, "rem-w-0", j.RemoteID)
	r.intakeDone()
	require.Equal(t, 1, f.createsOf("w"), "one create")
	t.Logf("deliveries that found the job under way: %d", busy.Load())
}
