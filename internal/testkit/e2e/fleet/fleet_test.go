package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/events"
)

// TestFleetOfProcesses is issue 4's acceptance run, with real processes: a
// nats-server, the simulated provider, one ingest and four pollers sharing
// a status budget of 3 and a submit budget of 2, 500 jobs through 429 storms,
// two pollers SIGKILLed midway and one more started. The provider's ground
// truth must show the budgets held fleet-wide, no call before a Retry-After
// passed, one create per idempotency key, and every job terminal once.
func TestFleetOfProcesses(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := e2etest.StartSimFleet(t, e2etest.SimFleetConfig{
		Token:     "fleet-token",
		TimeScale: 50,
		Sim: `
time_scale: 50
seed: 11
latency: 15ms
default: {queue_median: 3s, queue_sigma: 0.5, run_median: 40s, run_sigma: 0.4, fail_rate: 0.1}
faults: {rate_limit_rate: 0.01, retry_after: 1s, server_error_rate: 0.02}
`,
		Config: `
streams: {check_ack_wait: 5s}
routes:
  sim:
    kind: replicate
    base_url: http://{{sim}}
    token_env: SIM_TOKEN
    workers: {submit: 4, status: 8}
    budgets:
      submit: {concurrency: 2, lease_wait: 10s}
      status: {concurrency: 3, lease_wait: 10s}
    options: {idempotent: true}
`,
	})
	js := f.JS

	f.Launch("ingest", "ingest")
	var pollers []*e2etest.Proc
	for i := range 4 {
		pollers = append(pollers, f.Launch(fmt.Sprintf("poller-%d", i), "poller"))
	}
	log := e2etest.FollowFleet(t, js)

	const n = 500
	ids := map[string]bool{}
	var order []string
	rnd := rand.New(rand.NewPCG(4, 4))
	for i := range n {
		key := fmt.Sprintf("fleet-%03d", i)
		ids[events.KeyID("sim", key)] = true
		order = append(order, events.KeyID("sim", key))
		msg, err := json.Marshal(events.Submit{V: 1, IdempotencyKey: key, Model: "fleet/model", Input: json.RawMessage(`{}`)})
		require.NoError(t, err)
		for range 1 + rnd.IntN(2) { // some published twice
			_, err = js.Publish(context.Background(), events.Default.Submit("sim"), msg)
			require.NoError(t, err)
		}
	}

	// Midway, kill two pollers (mid-call, most likely) and start one more.
	e2etest.WaitFor(t, "a third of the jobs done", 90*time.Second, func() bool { return len(log.Terminal()) >= n/3 })
	pollers[0].Kill(t)
	pollers[1].Kill(t)
	f.Launch("poller-4", "poller")

	e2etest.WaitTerminal(t, js, log, order, 150*time.Second)

	for id := range ids {
		require.Len(t, log.Terminal()[id], 1, "job %s: exactly one terminal event", id)
	}
	st := e2etest.SimStats(t, f.SimURL)
	t.Logf("sim: creates %d, status calls %d, peak status %d, peak creates %d, 429s %d, 5xx %d",
		st.Creates, st.StatusCalls, st.PeakConcurrentStatus, st.PeakConcurrentCreates, st.RateLimited, st.ServerErrors)
	require.LessOrEqual(t, st.PeakConcurrentStatus, 3, "the status budget held across the fleet")
	require.LessOrEqual(t, st.PeakConcurrentCreates, 2, "the submit budget held across the fleet")
	require.Equal(t, 0, st.CallsBeforeRetryAfter)
	require.Equal(t, n, st.IdempotencyKeys)
	require.Equal(t, 0, st.DuplicateCreates, "one create per idempotency key")
	require.Positive(t, st.RateLimited, "the run met 429s")
}
