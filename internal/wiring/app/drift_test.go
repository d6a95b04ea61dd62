package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/internal/wiring/app"
	"github.com/pollux-dev/pollux/internal/wiring/metrics"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// A model that slows down twice is said as an operator reads it: a
// model_drift event on its route's event subject, and the route's
// pollux_learned_drift_ratio.
func TestADriftIsARouteEventAndAGauge(t *testing.T) {
	t.Parallel()
	nc, js := natstest.Connect(t, natstest.Server(t))
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	t.Cleanup(func() { cancel(); require.NoError(t, g.Wait()) })
	m := metrics.New()
	env, err := app.Open(gctx, g, &config.Config{Routes: map[string]config.Route{"r": {Kind: "sim"}}}, nc,
		map[string]*route.Route{"r": {Name: "r"}}, m, zerolog.Nop())
	require.NoError(t, err)

	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	end := func(d time.Duration) {
		env.Stats.Observe(&state.Job{ID: "j", Route: "r", Model: "kling-v2", State: state.Succeeded, SubmittedAt: at, CompletedAt: at.Add(d)})
	}
	for range 40 {
		end(time.Minute)
	}
	env.Stats.Flush(ctx)
	for range 16 {
		end(2 * time.Minute)
		env.Stats.Flush(ctx)
	}

	cons, err := js.OrderedConsumer(ctx, env.Res.Events.CachedInfo().Config.Name, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{env.NS.RouteEvent("r")}})
	require.NoError(t, err)
	msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	require.NoError(t, err)
	ev, err := events.DecodeRouteEvent(msg.Data())
	require.NoError(t, err)
	require.Equal(t, events.EventModelDrift, ev.Type)
	require.Equal(t, "pollux", ev.By)
	require.Equal(t, "kling-v2", ev.Drift.Model)
	require.InDelta(t, 2, ev.Drift.Ratio, 0.25)
	require.Contains(t, ev.Reason, "kling-v2 is")

	require.Eventually(t, func() bool {
		mfs, err := m.Registry().Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "pollux_learned_drift_ratio" {
				return mf.GetMetric()[0].GetGauge().GetValue() > 1.7
			}
		}
		return false
	}, 5*time.Second, 10*time.Millisecond, "the route's gauge shows the drift")
}
