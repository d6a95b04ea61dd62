//go:build unix

package e2e_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// skipClientsEnv, set to 1, skips TestClients; nothing else does.
const skipClientsEnv = "POLLUX_SKIP_CLIENTS"

// TestClients runs the client examples as real processes against a running
// Pollux: examples/node (the official NATS packages for Node.js) and
// examples/cli (the nats CLI and curl against the HTTP front door). Each
// checks what the v1 contract promises and exits non-zero on any mismatch.
// The tools come from `make tools`; a missing one fails the test unless
// POLLUX_SKIP_CLIENTS=1.
func TestClients(t *testing.T) {
	if os.Getenv(skipClientsEnv) == "1" {
		t.Skip(skipClientsEnv + "=1")
	}
	root := e2etest.Root(t)
	node := tool(t, "node")
	if _, err := os.Stat(filepath.Join(root, "examples/node/node_modules/@nats-io/transport-node/package.json")); err != nil {
		t.Fatalf("examples/node has no node_modules: run `make tools` (or set %s=1 to skip this test)", skipClientsEnv)
	}
	natsCLI := filepath.Join(root, "bin", "nats")
	if _, err := os.Stat(natsCLI); err != nil {
		natsCLI = tool(t, "nats")
	}
	bash := tool(t, "bash")
	tool(t, "curl")

	e := e2etest.Start(t, dev.StackConfig{
		Sim: sim.Config{TimeScale: 100, Models: map[string]sim.Model{
			"pollux-demo/preview": {QueueMedian: e2etest.D(time.Second), RunMedian: e2etest.D(5 * time.Second), RunSigma: 0.3},
			"pollux-demo/long":    {QueueMedian: e2etest.D(time.Second), RunMedian: e2etest.D(time.Hour)}, // canceled by the CLI example
		}},
		Route: config.Route{Workers: config.Workers{Submit: 8, Status: 8}},
	})
	env := append(os.Environ(),
		"NATS_URL="+e.NC.ConnectedUrl(), "POLLUX_HTTP_URL="+e.HTTPURL, "POLLUX_ROUTE="+dev.RouteName,
		"POLLUX_TIMEOUT_S=60", "NATS_CLI="+natsCLI)

	t.Run("node", func(t *testing.T) {
		t.Parallel()
		runClient(t, filepath.Join(root, "examples/node"), append(env, "POLLUX_JOBS=20"), node, "client.mjs")
	})
	t.Run("cli", func(t *testing.T) {
		t.Parallel()
		runClient(t, root, env, bash, "examples/cli/run.sh")
	})
}

// tool finds a program on PATH or fails the test saying how to get it.
func tool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: run `make tools` (needs Node.js 20+, bash and curl), or set %s=1 to skip this test", name, skipClientsEnv)
	}
	return path
}

// runClient runs a client to completion in dir and fails the test, showing
// its output, when it exits non-zero.
func runClient(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	// Its own process group, so a timeout ends what it started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	output := strings.TrimSpace(out.String())
	require.NoError(t, err, "%s %s:\n%s", filepath.Base(name), strings.Join(args, " "), output)
	t.Logf("%s", output[strings.LastIndexByte(output, '\n')+1:])
}
