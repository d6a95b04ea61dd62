package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// TestChaosProvider runs jobs against a provider that times out, answers
// 5xx in bursts and malformed JSON, says "unknown job" for live jobs, shows
// statuses going backwards, loses jobs and never finishes some: backoff and
// reconciliation must carry every job to its true end, and a deadline must
// end the jobs that never finish.
func TestChaosProvider(t *testing.T) {
	t.Parallel()
	e := e2etest.Start(t, dev.StackConfig{
		Sim: sim.Config{TimeScale: e2etest.Scale, Seed: 21,
			Models: map[string]sim.Model{
				"chaos/fast":  {QueueMedian: e2etest.D(2 * time.Second), QueueSigma: 0.5, RunMedian: e2etest.D(20 * time.Second), RunSigma: 0.4, FailRate: 0.1},
				"chaos/slow":  {QueueMedian: e2etest.D(5 * time.Second), RunMedian: e2etest.D(70 * time.Second), RunSigma: 0.4},
				"chaos/stuck": {QueueMedian: e2etest.D(2 * time.Second), NeverFinish: 1},
			},
			Faults: sim.Faults{
				RateLimitRate: 0.005, RetryAfter: e2etest.D(time.Second), ServerErrorRate: 0.05, LostRate: 0.02,
				HangRate: 0.02, HangFor: e2etest.D(2 * time.Second), MalformedRate: 0.03, FlapNotFoundRate: 0.03, RegressRate: 0.05,
				WebhookMissingRate: 0.3,
			}},
		Route: config.Route{Workers: config.Workers{Status: 16}, CallTimeout: 300 * time.Millisecond, NotFoundLimit: 6},
	})
	n := e2etest.Size(300, 3000)
	want := map[string]state.State{}
	ids := e2etest.SubmitN(t, e, "pc", n, func(i int) (string, float64) {
		switch {
		case i%40 == 7:
			return "chaos/stuck", 4
		case i%3 == 0:
			return "chaos/slow", 0
		}
		return "chaos/fast", 0
	})
	e.WaitTerminal(t, ids, time.Duration(e2etest.Size(120, 600))*time.Second)
	// A job that never finishes expires at its deadline. If the provider
	// lost it first (LostRate applies to it too), it ends lost or expired,
	// whichever of the "unknown job" limit and its deadline comes first
	// (e2etest.Verify holds that only jobs that never finish expire).
	truth := e.Sim.Predictions()
	lostKeys := map[string]bool{}
	for _, p := range truth {
		lostKeys[p.IdempotencyKey] = p.Lost
	}
	stuckLost := 0
	for i, id := range ids {
		switch {
		case i%40 == 7 && lostKeys[fmt.Sprintf("pc-%05d", i)]:
			stuckLost++
		case i%40 == 7:
			want[id] = state.Expired
		}
	}
	st := e.Sim.Stats()
	require.Positive(t, st.Hangs)
	require.Positive(t, st.Malformed)
	require.Positive(t, st.FlapNotFound)
	require.Positive(t, st.Regressed)
	o := e2etest.Verify(t, e, ids, want, truth, st)
	require.GreaterOrEqual(t, o.States[state.Expired], len(want), "every job that never finishes (and was not lost) expired")
	require.LessOrEqual(t, o.States[state.Expired], len(want)+stuckLost, "only jobs that never finish expired")
	e2etest.ReportFaults(t, "provider chaos", o)
}

// TestChaosNATSRestart restarts the NATS server (file storage) while jobs
// are tracked: every one resumes and finishes, polled on schedule.
func TestChaosNATSRestart(t *testing.T) {
	t.Parallel()
	ns := natstest.NewRestartable(t)
	nc, js := ns.Connect(t)
	// Jobs run long enough (15 s, or 4 minutes in the long form, of real
	// time) that nearly all are tracked when the server goes down. The
	// long form runs in real time: compressed, 10,000 jobs would ask more
	// polls a second than the race-instrumented stack makes, and the test
	// would measure overload, not the restart.
	timeScale := float64(e2etest.Size(10, 1))
	run := time.Duration(e2etest.Size(15, 240)) * time.Second
	scaled := func(d time.Duration) sim.Duration { return sim.Duration(float64(d) * timeScale) }
	e := e2etest.StartWith(t, nc, js, dev.StackConfig{
		Sim: sim.Config{TimeScale: timeScale, Seed: 22,
			Default: sim.Model{QueueMedian: scaled(time.Second), QueueSigma: 0.3, RunMedian: scaled(run), RunSigma: 0.15}},
		Route:      config.Route{Workers: config.Workers{Submit: 8, Status: 32}},
		NoWebhooks: true, // the checks alone must bring every job home
	})
	// A delivery the restart lost in transit is delivered again, and its
	// delivery count counts it as a poll: the polls of the checks in
	// flight may be one high.
	e.InexactPolls = true
	n := e2etest.Size(1000, 10000)
	ids := e2etest.SubmitN(t, e, "nr", n, func(int) (string, float64) { return "restart/model", 0 })
	e2etest.WaitFor(t, "all submitted and tracked", 3*time.Minute, func() bool {
		info, err := e.Env.Res.Checks.Info(context.Background())
		return err == nil && int(info.State.Msgs)+len(e.Log.Terminal()) >= n
	})
	tracked, _ := e.Env.Res.Checks.Info(context.Background())
	down := ns.Restart(t, time.Second)
	t.Logf("restarted NATS with %d jobs tracked (down %s)", tracked.State.Msgs, down.Round(time.Millisecond))
	e.WaitTerminal(t, ids, time.Duration(e2etest.Size(180, 900))*time.Second)
	o := e2etest.Verify(t, e, ids, nil, e.Sim.Predictions(), e.Sim.Stats())
	o.Faults = 1
	// On schedule: a job is found done within the longest polling interval
	// (the policy's 60 s cap, compressed) of when it finished, plus the
	// restart and the clients' return; no more.
	require.Less(t, o.WorstDelay, time.Duration(float64(time.Minute)/timeScale)+30*time.Second, "polls resumed on schedule")
	e2etest.ReportFaults(t, fmt.Sprintf("NATS restart (%d tracked)", tracked.State.Msgs), o)
}
