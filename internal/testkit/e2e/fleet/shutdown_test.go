package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/events"
)

// TestGracefulShutdown sends SIGTERM to an ingest and a poller process
// while their provider calls are in flight. Each must exit 0 within its
// drain bound, settling what it held: with ack waits of a minute, any
// message it abandoned would hold its job back for that minute, so every
// job finishing well within it (with fresh processes) shows none was.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := e2etest.StartSimFleet(t, e2etest.SimFleetConfig{
		Token:     "drain-token",
		TimeScale: 50,
		Sim: `
time_scale: 50
seed: 12
latency: 300ms
default: {queue_median: 2s, run_median: 60s, run_sigma: 0.3}
`,
		Config: `
streams: {intake_ack_wait: 60s, check_ack_wait: 60s}
routes:
  sim:
    kind: replicate
    base_url: http://{{sim}}
    token_env: SIM_TOKEN
    workers: {submit: 8, status: 8}
    options: {idempotent: true}
`,
	})
	js := f.JS

	ingest := f.Launch("ingest-1", "ingest")
	poller := f.Launch("poller-1", "poller")
	log := e2etest.FollowFleet(t, js)

	const n = 150
	for i := range n {
		msg, err := json.Marshal(events.Submit{V: 1, IdempotencyKey: fmt.Sprintf("drain-%03d", i), Model: "drain/model", Input: json.RawMessage(`{}`)})
		require.NoError(t, err)
		_, err = js.Publish(context.Background(), events.Default.Submit("sim"), msg)
		require.NoError(t, err)
	}
	e2etest.WaitFor(t, "submits and polls in flight", 30*time.Second, func() bool {
		st := e2etest.SimStats(t, f.SimURL)
		return st.Creates >= 20 && st.StatusCalls >= 20
	})
	stopped := time.Now()
	for _, p := range []*e2etest.Proc{ingest, poller} {
		require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	}
	for _, p := range []*e2etest.Proc{ingest, poller} {
		select {
		case <-p.Done():
		case <-time.After(40 * time.Second):
			t.Fatalf("%s did not exit within 40s of SIGTERM", p.Name)
		}
		require.Equal(t, 0, p.Cmd.ProcessState.ExitCode(), "%s exits 0", p.Name)
	}
	t.Logf("ingest and poller drained and exited %s after SIGTERM", time.Since(stopped).Round(time.Millisecond))

	f.Launch("ingest-2", "ingest")
	f.Launch("poller-2", "poller")
	e2etest.WaitFor(t, "every job terminal, sooner than an abandoned message's ack wait", 45*time.Second,
		func() bool { return len(log.Terminal()) >= n })
	st := e2etest.SimStats(t, f.SimURL)
	require.Equal(t, n, st.IdempotencyKeys)
	require.Zero(t, st.DuplicateCreates, "no submission was made twice")
}
