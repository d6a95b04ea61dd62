package e2e_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/services/poller"
	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/internal/wiring/app"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// TestRepartitionLosesNothing changes a route's partition count twice
// while jobs are tracked: a poller started with 4 partitions replaces the
// running poller's single consumer, then one with 2 replaces those. The
// running pollers follow each change, and every job still finishes
// exactly once with no check left behind.
func TestRepartitionLosesNothing(t *testing.T) {
	t.Parallel()
	e := e2etest.Start(t, dev.StackConfig{
		Sim: sim.Config{TimeScale: e2etest.Scale, Seed: 31, Models: map[string]sim.Model{
			"part/model": {QueueMedian: e2etest.D(2 * time.Second), QueueSigma: 0.5, RunMedian: e2etest.D(60 * time.Second), RunSigma: 0.5},
		}},
		NoWebhooks: true,
	})
	// A new consumer's deliveries count anew: the quiet polls a check made
	// under the consumer it replaced are not in the job's count.
	e.InexactPolls = true
	n := 300
	ids := e2etest.SubmitN(t, e, "rp", n, func(int) (string, float64) { return "part/model", 0 })

	var stops []func()
	startPoller := func(parts int) {
		r := *e.Env.Routes[dev.RouteName]
		r.Partitions = parts
		po, err := poller.New(poller.Config{Routes: map[string]*route.Route{r.Name: &r}, Options: e.Env.Options()},
			e.Env.JS, e.Env.NS, e.Env.Res, e.Env.Jobs.Polls(), processGates(t, e.Env))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- po.Run(ctx) }()
		stop := sync.OnceFunc(func() { cancel(); require.NoError(t, <-done) })
		stops = append(stops, stop)
		t.Cleanup(stop)
	}
	consumers := func() []string {
		var out []string
		names := e.Env.Res.Checks.ConsumerNames(context.Background())
		for name := range names.Name() {
			out = append(out, name)
		}
		require.NoError(t, names.Err())
		slices.Sort(out)
		return out
	}

	e2etest.WaitFor(t, "a quarter of the jobs done", time.Minute, func() bool { return len(e.Log.Terminal()) >= n/4 })
	startPoller(4)
	e2etest.WaitFor(t, "four partitions", 30*time.Second, func() bool {
		return slices.Equal(consumers(), []string{"poller-sim~0of4", "poller-sim~1of4", "poller-sim~2of4", "poller-sim~3of4"})
	})
	e2etest.WaitFor(t, "half of the jobs done", time.Minute, func() bool { return len(e.Log.Terminal()) >= n/2 })
	startPoller(2)
	e2etest.WaitFor(t, "two partitions", 30*time.Second, func() bool {
		return slices.Equal(consumers(), []string{"poller-sim~0of2", "poller-sim~1of2"})
	})
	e.WaitTerminal(t, ids, 2*time.Minute)

	// Only the first poller is left: it follows the two partitions, so
	// new jobs finish too.
	for _, stop := range stops {
		stop()
	}
	more := e2etest.SubmitN(t, e, "rq", 100, func(int) (string, float64) { return "part/model", 0 })
	ids = append(ids, more...)
	e.WaitTerminal(t, ids, 2*time.Minute)
	o := e2etest.Verify(t, e, ids, nil, e.Sim.Predictions(), e.Sim.Stats())
	require.Zero(t, o.Lost)
	t.Logf("repartitioned 1 → 4 → 2 under load: %s", o)
}

// processGates are the gates of another poller process on env's
// namespace: its own pool of leases, closed when the test ends.
func processGates(t *testing.T, env *app.Env) *route.Gates {
	gs := route.NewGates(env.JS, env.NS, env.Res.Slots, env.Options(), env.Pauses, route.GateConfig{})
	t.Cleanup(gs.Close)
	return gs
}
