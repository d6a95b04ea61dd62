package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/events"
)

// TestGracefulShutdown sends SIGTERM to an ingest and a poller process
// while their provider calls are in flight. Each must exit 0 within its
// drain bound, settling what it held: with ack waits of a minute, any
// message it abandoned would hold its job back for that minute, so every
// job finishing well within it (with fresh processes) shows none was.
func TestGracefulShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	bin := binaries(t)
	dir := t.TempDir()
	natsURL, js := natsProcess(t, bin, dir)
	env := []string{"SIM_TOKEN=drain-token"}
	_, simAddr := simProcess(t, bin, dir, "sim", `
time_scale: 50
seed: 12
latency: 300ms
default: {queue_median: 2s, run_median: 60s, run_sigma: 0.3}
`, env, "SIM_TOKEN")
	cfg := filepath.Join(dir, "pollux.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`
streams: {intake_ack_wait: 60s, check_ack_wait: 60s}
routes:
  sim:
    kind: replicate
    base_url: http://%s
    token_env: SIM_TOKEN
    workers: {submit: 8, status: 8}
    options: {idempotent: true}
`, simAddr)), 0o600))
	svcEnv := append(env, "POLLUX_NATS_URL="+natsURL, "POLLUX_CONFIG="+cfg, "POLLUX_METRICS_ADDR=", "POLLUX_TIME_SCALE=50")

	ingest := launch(t, "ingest-1", svcEnv, filepath.Join(bin, "ingest"))
	poller := launch(t, "poller-1", svcEnv, filepath.Join(bin, "poller"))
	log := followFleet(t, js)

	const n = 150
	for i := range n {
		msg, err := json.Marshal(events.Submit{V: 1, IdempotencyKey: fmt.Sprintf("drain-%03d", i), Model: "drain/model", Input: json.RawMessage(`{}`)})
		require.NoError(t, err)
		_, err = js.Publish(context.Background(), events.Default.Submit("sim"), msg)
		require.NoError(t, err)
	}
	waitFor(t, "submits and polls in flight", 30*time.Second, func() bool {
		st := simStats(t, "http://"+simAddr)
		return st.Creates >= 20 && st.StatusCalls >= 20
	})
	stopped := time.Now()
	for _, p := range []*proc{ingest, poller} {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	}
	for _, p := range []*proc{ingest, poller} {
		select {
		case <-p.done:
		case <-time.After(40 * time.Second):
			t.Fatalf("%s did not exit within 40s of SIGTERM", p.name)
		}
		require.Equal(t, 0, p.cmd.ProcessState.ExitCode(), "%s exits 0", p.name)
	}
	t.Logf("ingest and poller drained and exited %s after SIGTERM", time.Since(stopped).Round(time.Millisecond))

	launch(t, "ingest-2", svcEnv, filepath.Join(bin, "ingest"))
	launch(t, "poller-2", svcEnv, filepath.Join(bin, "poller"))
	waitFor(t, "every job terminal, sooner than an abandoned message's ack wait", 45*time.Second,
		func() bool { return len(log.terminal()) >= n })
	st := simStats(t, "http://"+simAddr)
	require.Equal(t, n, st.IdempotencyKeys)
	require.Zero(t, st.DuplicateCreates, "no submission was made twice")
}
