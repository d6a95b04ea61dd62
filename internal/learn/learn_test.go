package learn_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/learn"
	"github.com/pollux-dev/pollux/internal/natstest"
	"github.com/pollux-dev/pollux/pkg/state"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func finished(st state.State, total, run time.Duration) *state.Job {
	j := &state.Job{ID: "j", Route: "r", Model: "owner/model:v1", State: st, SubmittedAt: t0, CompletedAt: t0.Add(total)}
	if run > 0 {
		j.StartedAt = j.CompletedAt.Add(-run)
	}
	return j
}

func TestDurations(t *testing.T) {
	t.Parallel()
	total, run, ok := learn.Durations(finished(state.Succeeded, 90*time.Second, 60*time.Second))
	require.True(t, ok)
	require.Equal(t, 90*time.Second, total)
	require.Equal(t, 60*time.Second, run)

	_, run, ok = learn.Durations(finished(state.Failed, 10*time.Second, 0))
	require.True(t, ok, "failures end on their own too")
	require.Zero(t, run, "never started: no run time")

	providerCancel := finished(state.Canceled, 30*time.Second, 0)
	_, _, ok = learn.Durations(providerCancel)
	require.True(t, ok)

	userCancel := finished(state.Canceled, 30*time.Second, 0)
	userCancel.CancelRequestedAt = t0
	for _, j := range []*state.Job{userCancel, finished(state.Expired, time.Hour, 0), finished(state.Lost, time.Minute, 0),
		finished(state.Running, time.Minute, 0), {State: state.Succeeded}} {
		_, _, ok := learn.Durations(j)
		require.False(t, ok, "%s teaches nothing", j.State)
	}
}

// fleet returns n Stats over one bucket, as n processes would have.
func fleet(t *testing.T, n int) []*learn.Stats {
	t.Helper()
	_, _, js := natstest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "stats"})
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	out := make([]*learn.Stats, n)
	for i := range out {
		s := learn.New(kv, zerolog.Nop())
		s.FlushEvery = time.Hour // the tests flush by hand
		ready := make(chan struct{})
		wg.Go(func() { require.NoError(t, s.Run(ctx, ready)) })
		<-ready
		out[i] = s
	}
	return out
}

func TestTheFleetLearnsTogether(t *testing.T) {
	t.Parallel()
	ss := fleet(t, 3)
	ctx := context.Background()
	total, run := ss[0].Lookup("r", "owner/model:v1", "")
	require.Nil(t, total, "nothing learned yet")
	require.Nil(t, run)

	// Every process sees jobs end, concurrently.
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Go(func() {
			for range 40 {
				s.Observe(finished(state.Succeeded, 90*time.Second, 60*time.Second))
			}
			s.Flush(ctx)
		})
	}
	wg.Wait()
	for _, s := range ss {
		require.Eventually(t, func() bool {
			total, run := s.Lookup("r", "owner/model:v1", "")
			return total != nil && total.Count() == 120 && run.Count() == 120
		}, 5*time.Second, 10*time.Millisecond, "no observation lost to a concurrent writer, and all processes see them")
	}
	total, run = ss[1].Lookup("r", "owner/model:v1", "")
	require.InDelta(t, 90, total.Quantile(0.5).Seconds(), 10)
	require.InDelta(t, 60, run.Quantile(0.5).Seconds(), 7)

	other, _ := ss[1].Lookup("r", "owner/model:v1", "1080p")
	require.Nil(t, other, "a configuration key is learned apart")
}

func TestKeysAreValidForAnyModelName(t *testing.T) {
	t.Parallel()
	ss := fleet(t, 1)
	for _, model := range []string{"owner/name:0123abc", "a b*c>d", "ünïcødé", ""} {
		j := finished(state.Succeeded, time.Minute, 0)
		j.Model = model
		ss[0].Observe(j)
	}
	ss[0].Flush(context.Background())
	for _, model := range []string{"owner/name:0123abc", "a b*c>d", "ünïcødé", ""} {
		total, _ := ss[0].Lookup("r", model, "")
		require.NotNil(t, total, model)
		require.Equal(t, uint64(1), total.Count())
	}
}
