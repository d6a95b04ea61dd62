package e2etest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

	"github.com/pollux-dev/pollux/internal/platform/faultpoint"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// Binaries builds the fleet's binaries (ingest, poller, webhook, pollux)
// with the crash points compiled in (the faultpoints build tag, see
// internal/platform/faultpoint), and a nats-server, once per test package, into a
// directory Main removes; it returns that directory.
func Binaries(t *testing.T) string {
	t.Helper()
	dir := Root(t)
	build.once.Do(func() {
		out, err := os.MkdirTemp("", "pollux-e2e-bin-")
		if err != nil {
			build.err = err
			return
		}
		build.dir = out
		for _, pkg := range []string{"./cmd/ingest", "./cmd/poller", "./cmd/webhook", "./cmd/pollux", "github.com/nats-io/nats-server/v2"} {
			bin := filepath.Join(out, filepath.Base(pkg))
			if pkg == "github.com/nats-io/nats-server/v2" {
				bin = filepath.Join(out, "nats-server")
			}
			cmd := exec.CommandContext(context.Background(), "go", "build", "-tags", faultpoint.Tag, "-o", bin, pkg)
			cmd.Dir = dir
			if b, err := cmd.CombinedOutput(); err != nil {
				build.err = fmt.Errorf("go build %s: %w: %s", pkg, err, b)
				return
			}
		}
		// The fault tests arm crash points through the environment: a
		// build without them would pass those tests without one crash.
		b, err := os.ReadFile(filepath.Join(out, "ingest"))
		if err == nil && !bytes.Contains(b, []byte(faultpoint.Env)) {
			err = fmt.Errorf("the ingest binary built with -tags %s does not read %s", faultpoint.Tag, faultpoint.Env)
		}
		build.err = err
	})
	require.NoError(t, build.err)
	return build.dir
}

// build is the one build of the binaries a test package's tests share.
var build struct {
	once sync.Once
	dir  string
	err  error
}

// Main runs a test package's tests, removes the binaries Binaries built
// for them, and exits with the tests' status: the package's TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

// FreePort is a free TCP port on the loopback interface.
func FreePort(t *testing.T) int { return natstest.FreePort(t) }

// Proc is a fleet process; its output goes to a file shown on failure.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	// LogFile holds the process's standard output and error.
	LogFile string
	done    chan struct{}
}

// Launch starts the program at path as a process named name, with env
// added to the test's environment. When the test ends it is sent SIGTERM
// (SIGKILL after 15 s), and, if the test failed, the end of its output is
// logged.
func Launch(t *testing.T, name string, env []string, path string, args ...string) *Proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.CommandContext(context.Background(), path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	require.NoError(t, cmd.Start())
	p := &Proc{Name: name, Cmd: cmd, LogFile: logPath, done: make(chan struct{})}
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

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Kill SIGKILLs the process and waits until it has exited.
func (p *Proc) Kill(t *testing.T) {
	t.Helper()
	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGKILL))
	<-p.done
}

// ReadLog is the process's output so far.
func ReadLog(t *testing.T, p *Proc) string {
	t.Helper()
	b, err := os.ReadFile(p.LogFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		require.NoError(t, err)
	}
	return string(b)
}

// NATSProcess starts a nats-server process with JetStream files under dir
// and connects to it; it returns the server's URL and the connection's
// JetStream.
func NATSProcess(t *testing.T, bin, dir string) (string, jetstream.JetStream) {
	t.Helper()
	port := FreePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	Launch(t, "nats-server", nil, filepath.Join(bin, "nats-server"),
		"-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", filepath.Join(dir, "js"))
	nc, err := nats.Connect(url, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	WaitFor(t, "nats-server", 20*time.Second, func() bool { return nc.IsConnected() })
	return url, js
}

// SimProcess starts `pollux sim-provider` named name with the YAML config
// conf; the token is read from tokenEnv, which env must set. It returns the
// process and its host:port.
func SimProcess(t *testing.T, bin, dir, name, conf string, env []string, tokenEnv string) (*Proc, string) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	path := filepath.Join(dir, name+".yaml")
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	return Launch(t, name, env, filepath.Join(bin, "pollux"), "sim-provider", "--addr", addr, "--config", path, "--token-env", tokenEnv), addr
}

// SimStats is the statistics of the simulated provider at base.
func SimStats(t *testing.T, base string) sim.Stats {
	t.Helper()
	resp, err := httpGet(base + "/_sim/stats")
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	require.NoError(t, err)
	var st sim.Stats
	require.NoError(t, json.Unmarshal(buf.Bytes(), &st), buf.String())
	return st
}

// Get is the body of a GET of u, which must answer 200.
func Get(t *testing.T, u string) string {
	t.Helper()
	resp, err := httpGet(u)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	return string(b)
}

// httpGet is http.Get.
func httpGet(u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	return http.DefaultClient.Do(req)
}

// FollowFleet waits until the fleet has created its streams and follows
// the events.
func FollowFleet(t *testing.T, js jetstream.JetStream) *EventLog {
	t.Helper()
	WaitFor(t, "streams created", 30*time.Second, func() bool {
		_, err := js.Stream(context.Background(), events.Default.EventsStream())
		return err == nil
	})
	return Follow(t, js, events.Default)
}
