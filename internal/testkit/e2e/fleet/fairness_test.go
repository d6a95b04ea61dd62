package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
)

// TestFairness is issue 4's fairness claim, with real processes: one ingest
// and one poller serve three routes, each on its own simulated provider.
//
//   - busy: 20 jobs already running when 10,000 submissions arrive at once,
//     more than its submit budget (2 in flight, 50/s) can create in minutes;
//   - slow: every call takes three minutes;
//   - paused: the first call is answered 429 with a five-minute Retry-After.
//
// The running jobs must be polled to their ends while the burst is still
// queued (submissions and status polls have their own consumers, workers
// and budgets), and the busy route must keep submitting and finishing jobs
// while the slow route's calls hang and the paused route waits, without a
// single call to the paused provider before its Retry-After. The test ends
// once that is shown; whole runs to completion are the other suites' job.
func TestFairness(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := e2etest.StartSimFleet(t, e2etest.SimFleetConfig{
		Sims: map[string]string{
			"busy": `
time_scale: 50
seed: 5
latency: 5ms
models:
  early/model: {queue_median: 20s, queue_sigma: 0.3, run_median: 100s, run_sigma: 0.3}
default: {queue_median: 20s, run_median: 200s}
`,
			"slow":   "latency: 3m\n",
			"paused": "faults: {rate_limit_rate: 1, retry_after: 5m}\n",
		},
		Config: `
routes:
  busy:
    kind: replicate
    base_url: http://{{sim.busy}}
    token_env: SIM_TOKEN
    workers: {submit: 4, status: 8}
    budgets:
      submit: {concurrency: 2, rate: 50/s}
      status: {concurrency: 4}
    options: {idempotent: true}
  slow:
    kind: replicate
    base_url: http://{{sim.slow}}
    token_env: SIM_TOKEN
    call_timeout: 5m
    options: {idempotent: true}
  paused:
    kind: replicate
    base_url: http://{{sim.paused}}
    token_env: SIM_TOKEN
    options: {idempotent: true}
`,
		Token:     "fair-token",
		TimeScale: 50,
	})
	js := f.JS
	ingest := f.Launch("ingest", "ingest")
	f.Launch("poller", "poller")
	log := e2etest.FollowFleet(t, js)

	submit := func(route, key, model string) string {
		msg, err := json.Marshal(events.Submit{V: 1, IdempotencyKey: key, Model: model, Input: json.RawMessage(`{}`)})
		require.NoError(t, err)
		_, err = js.Publish(context.Background(), events.Default.Submit(route), msg)
		require.NoError(t, err)
		return events.KeyID(route, key)
	}
	submitted := func(id string) bool {
		return slices.ContainsFunc(log.Jobs()[id], func(ev *events.Event) bool { return ev.Type == events.EventSubmitted })
	}

	// The slow and paused routes get work first, so that they are stuck
	// before anything else arrives.
	var stuck []string
	for i := range 8 {
		stuck = append(stuck, submit("slow", fmt.Sprintf("slow-%d", i), "slow/model"), submit("paused", fmt.Sprintf("paused-%d", i), "paused/model"))
	}
	var early []string
	for i := range 20 {
		early = append(early, submit("busy", fmt.Sprintf("early-%02d", i), "early/model"))
	}
	e2etest.WaitFor(t, "the early jobs submitted", 60*time.Second, func() bool {
		return !slices.ContainsFunc(early, func(id string) bool { return !submitted(id) })
	})

	// The burst: 10,000 submissions published at once.
	const burst = 10_000
	burstIDs := map[string]bool{}
	natstest.PublishMany(t, js, burst, func(i int) (string, []byte) {
		key := fmt.Sprintf("burst-%05d", i)
		burstIDs[events.KeyID("busy", key)] = true
		msg, err := json.Marshal(events.Submit{V: 1, IdempotencyKey: key, Model: "burst/model", Input: json.RawMessage(`{}`)})
		require.NoError(t, err)
		return events.Default.Submit("busy"), msg
	})

	// The running jobs are polled to their ends while the burst waits, and
	// burst jobs keep moving while the other two routes are stuck.
	e2etest.WaitFor(t, "the early jobs terminal", 90*time.Second, func() bool {
		return !slices.ContainsFunc(early, func(id string) bool { return len(log.Terminal()[id]) == 0 })
	})
	var delays []time.Duration
	for _, id := range early {
		require.Len(t, log.Terminal()[id], 1, "job %s: exactly one terminal event", id)
		if j := log.Terminal()[id][0].Job; j != nil && !j.CompletedAt.IsZero() {
			delays = append(delays, j.DetectedAt.Sub(j.CompletedAt))
		}
	}
	slices.Sort(delays)
	require.NotEmpty(t, delays)
	busy := e2etest.SimStats(t, f.Sims["busy"].URL)
	t.Logf("early jobs done with %d of %d burst jobs created; detection delay median %v, worst %v",
		busy.Creates-len(early), burst, delays[len(delays)/2], delays[len(delays)-1])
	require.Less(t, busy.Creates, len(early)+burst/2, "the early jobs finished while most of the burst still waited")

	burstDone := func() int {
		n := 0
		for id := range log.Terminal() {
			if burstIDs[id] {
				n++
			}
		}
		return n
	}
	e2etest.WaitFor(t, "burst jobs finishing", 90*time.Second, func() bool { return burstDone() >= 20 })

	for _, id := range stuck {
		require.Empty(t, log.Terminal()[id], "job %s on a stuck route cannot have finished", id)
		require.False(t, submitted(id), "job %s on a stuck route cannot have been submitted", id)
	}
	paused := e2etest.SimStats(t, f.Sims["paused"].URL)
	require.Positive(t, paused.RateLimited, "the paused route met its 429")
	require.Zero(t, paused.CallsBeforeRetryAfter, "nothing was sent to the paused route after its 429")
	require.Positive(t, e2etest.SimStats(t, f.Sims["slow"].URL).PeakConcurrentCreates, "the slow route's calls were under way")

	// A graceful stop would wait out the hung calls (ingest's 15 s drain,
	// the slow provider's own shutdown): the claim is shown, so kill.
	ingest.Kill(t)
	f.Sims["slow"].Proc.Kill(t)
}
