package dev_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// With nothing configured but learn_running and learn_rate, a route on an
// account whose hidden limits are 3 running and 4 calls a second learns
// both from the provider's refusals — the concurrency refusals lower the
// running cap, the rate refusals the call rates — and every job is
// created once and finishes. (How close to the hidden limits the fleet
// runs, and how rarely it is refused once it learned them, is a figure:
// `pollux bench --only limits`.)
func TestHiddenLimitsAreLearned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, js := startStack(t, dev.StackConfig{
		Sim: sim.Config{Seed: 5, Limits: sim.Limits{Running: 3, Rate: 4},
			Default: sim.Model{QueueMedian: sim.Duration(100 * time.Millisecond), RunMedian: sim.Duration(time.Second)}},
		Route:      config.Route{Budgets: config.Budgets{LearnRunning: true, LearnRate: true}, Workers: config.Workers{Submit: 8}},
		NoWebhooks: true,
	})

	const jobs = 30
	ids := make([]string, jobs)
	for i := range ids {
		key := fmt.Sprintf("hidden-%02d", i)
		ids[i] = events.KeyID(dev.RouteName, key)
		msg, err := json.Marshal(events.Submit{V: events.Version, IdempotencyKey: key, Model: "m/model", Input: json.RawMessage(`{}`)})
		require.NoError(t, err)
		_, err = js.Publish(ctx, st.Env.NS.Submit(dev.RouteName), msg)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		for _, id := range ids {
			j, err := st.Env.Jobs.Get(ctx, id)
			if err != nil || !j.State.Terminal() {
				return false
			}
		}
		return true
	}, 3*time.Minute, 250*time.Millisecond, "every job ends")
	for _, id := range ids {
		j, err := st.Env.Jobs.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, state.Succeeded, j.State, "job %s: %s", id, j.Reason)
	}
	stats := st.Sim.Stats()
	t.Logf("sim: %d calls, %d refused for the rate, %d for running jobs, peak running %d",
		stats.Calls, stats.RateRefused, stats.RunningRefused, stats.PeakRunning)
	require.Equal(t, jobs, stats.IdempotencyKeys)
	require.Equal(t, 1, stats.MaxCreatesPerKey, "every job created once")

	if stats.RunningRefused > 0 {
		s, err := js.Stream(ctx, st.Env.NS.RunningStream(events.LevelRoute, dev.RouteName))
		require.NoError(t, err)
		learned := s.CachedInfo().Config.MaxMsgs
		require.Less(t, learned, int64(budget.Uncapped), "the running cap came down")
		require.GreaterOrEqual(t, learned, int64(3), "not below the provider's")
	}
	require.Positive(t, stats.RateRefused, "4 calls a second is below what 30 jobs ask for")
	kv, err := js.KeyValue(ctx, st.Env.NS.LimitsBucket())
	require.NoError(t, err)
	keys, err := kv.ListKeys(ctx)
	require.NoError(t, err)
	var learned []string
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		require.NoError(t, err)
		var r budget.LearnedRate
		require.NoError(t, json.Unmarshal(e.Value(), &r))
		require.Positive(t, r.Rate)
		learned = append(learned, fmt.Sprintf("%s=%.2f/s", k, r.Rate))
	}
	t.Logf("learned rates: %v", learned)
	require.NotEmpty(t, learned, "a call rate was learned")
}

// startStack runs a stack on its own embedded server until the test ends,
// and connects to that server.
func startStack(t *testing.T, sc dev.StackConfig) (*dev.Stack, jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	nc, js := natstest.Connect(t, natstest.Server(t))
	g, gctx := errgroup.WithContext(ctx)
	t.Cleanup(func() {
		cancel()
		require.NoError(t, g.Wait())
	})
	st, err := dev.Start(gctx, g, nc, sc)
	require.NoError(t, err)
	return st, js
}
