package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// binaries builds the fleet's binaries and a nats-server once per package
// run, into a directory TestMain removes.
func binaries(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		dir, err := os.MkdirTemp("", "pollux-e2e-bin-")
		if err != nil {
			build.err = err
			return
		}
		build.dir = dir
		for _, pkg := range []string{"./cmd/ingest", "./cmd/poller", "./cmd/webhook", "./cmd/pollux", "github.com/nats-io/nats-server/v2"} {
			out := filepath.Join(dir, filepath.Base(pkg))
			if pkg == "github.com/nats-io/nats-server/v2" {
				out = filepath.Join(dir, "nats-server")
			}
			cmd := exec.Command("go", "build", "-o", out, pkg)
			cmd.Dir = "../.."
			if b, err := cmd.CombinedOutput(); err != nil {
				build.err = fmt.Errorf("go build %s: %w: %s", pkg, err, b)
				return
			}
		}
	})
	require.NoError(t, build.err)
	return build.dir
}

// build is the one build of the binaries the process tests share.
var build struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

func freePort(t *testing.T) int { return natstest.FreePort(t) }

// proc is a fleet process; its output goes to a file shown on failure.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func launch(t *testing.T, name string, env []string, path string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	require.NoError(t, cmd.Start())
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = f.Close(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("--- %s (last lines) ---\n%s", name, b)
		}
	})
	return p
}

func (p *proc) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done
}

// TestFleetOfProcesses is issue 4's acceptance run, with real processes: a
// nats-server, the simulated provider, one ingest and four pollers sharing
// a status budget of 3 and a submit budget of 2, 500 jobs through 429 storms,
// two pollers SIGKILLed midway and one more started. The provider's ground
// truth must show the budgets held fleet-wide, no call before a Retry-After
// passed, one create per idempotency key, and every job terminal once.
func TestFleetOfProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	bin := binaries(t)
	dir := t.TempDir()

	natsURL, js := natsProcess(t, bin, dir)

	env := []string{"SIM_TOKEN=fleet-token"}
	_, simAddr := simProcess(t, bin, dir, "sim", `
time_scale: 50
seed: 11
latency: 15ms
default: {queue_median: 3s, queue_sigma: 0.5, run_median: 40s, run_sigma: 0.4, fail_rate: 0.1}
faults: {rate_limit_rate: 0.01, retry_after: 1s, server_error_rate: 0.02}
`, env, "SIM_TOKEN")

	cfg := filepath.Join(dir, "pollux.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`
streams: {check_ack_wait: 5s}
routes:
  sim:
    kind: replicate
    base_url: http://%s
    token_env: SIM_TOKEN
    workers: {submit: 4, status: 8}
    budgets:
      submit: {concurrency: 2, lease_wait: 10s}
      status: {concurrency: 3, lease_wait: 10s}
    options: {idempotent: true}
`, simAddr)), 0o600))
	svcEnv := append(env, "POLLUX_NATS_URL="+natsURL, "POLLUX_CONFIG="+cfg, "POLLUX_METRICS_ADDR=", "POLLUX_TIME_SCALE=50")

	launch(t, "ingest", svcEnv, filepath.Join(bin, "ingest"))
	var pollers []*proc
	for i := range 4 {
		pollers = append(pollers, launch(t, fmt.Sprintf("poller-%d", i), svcEnv, filepath.Join(bin, "poller")))
	}
	log := followFleet(t, js)

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
	waitFor(t, "a third of the jobs done", 90*time.Second, func() bool { return len(log.terminal()) >= n/3 })
	pollers[0].kill(t)
	pollers[1].kill(t)
	launch(t, "poller-4", svcEnv, filepath.Join(bin, "poller"))

	waitTerminal(t, js, log, order, 150*time.Second)

	for id := range ids {
		require.Len(t, log.terminal()[id], 1, "job %s: exactly one terminal event", id)
	}
	st := simStats(t, "http://"+simAddr)
	t.Logf("sim: creates %d, status calls %d, peak status %d, peak creates %d, 429s %d, 5xx %d",
		st.Creates, st.StatusCalls, st.PeakConcurrentStatus, st.PeakConcurrentCreates, st.RateLimited, st.ServerErrors)
	require.LessOrEqual(t, st.PeakConcurrentStatus, 3, "the status budget held across the fleet")
	require.LessOrEqual(t, st.PeakConcurrentCreates, 2, "the submit budget held across the fleet")
	require.Equal(t, 0, st.CallsBeforeRetryAfter)
	require.Equal(t, n, st.IdempotencyKeys)
	require.Equal(t, 0, st.DuplicateCreates, "one create per idempotency key")
	require.Positive(t, st.RateLimited, "the run met 429s")
}

func simStats(t *testing.T, base string) sim.Stats {
	t.Helper()
	resp, err := http.Get(base + "/_sim/stats")
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	require.NoError(t, err)
	var st sim.Stats
	require.NoError(t, json.Unmarshal(buf.Bytes(), &st), buf.String())
	return st
}

// natsProcess starts a nats-server process with JetStream files under dir
// and connects to it; it returns the server's URL and the connection's
// JetStream.
func natsProcess(t *testing.T, bin, dir string) (string, jetstream.JetStream) {
	t.Helper()
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	launch(t, "nats-server", nil, filepath.Join(bin, "nats-server"),
		"-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", filepath.Join(dir, "js"))
	nc, err := nats.Connect(url, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	waitFor(t, "nats-server", 20*time.Second, func() bool { return nc.IsConnected() })
	return url, js
}

// simProcess starts `pollux sim-provider` named name with the YAML config
// conf; the token is read from tokenEnv, which env must set. It returns the
// process and its host:port.
func simProcess(t *testing.T, bin, dir, name, conf string, env []string, tokenEnv string) (*proc, string) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	path := filepath.Join(dir, name+".yaml")
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	return launch(t, name, env, filepath.Join(bin, "pollux"), "sim-provider", "--addr", addr, "--config", path, "--token-env", tokenEnv), addr
}

// followFleet waits until the fleet has created its streams and follows
// the events.
func followFleet(t *testing.T, js jetstream.JetStream) *eventLog {
	t.Helper()
	waitFor(t, "streams created", 30*time.Second, func() bool {
		_, err := js.Stream(context.Background(), events.Default.EventsStream())
		return err == nil
	})
	return follow(t, js, events.Default)
}
