package faces_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/edge/tenant"
	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Tokens of the faces' front door: an app that may submit, one that may
// only read.
const (
	tokenApp  = "faces-app-token-0123456789abcdef"
	tokenRead = "faces-read-token-0123456789abcdef"
	// tokenQuota may make a request a second, across the fleet.
	tokenQuota = "faces-quota-token-0123456789abcdef"
)

// sdkEnv is what the new faces' scripts (genai, runway, luma.mjs) are
// run with: the front door, the app's token, a read-only one and one with
// a quota of a request a second, and extra.
func (s *stack) sdkEnv(extra ...string) []string {
	return append([]string{"POLLUX_URL=" + s.URL, "TOKEN=" + tokenApp, "READ_TOKEN=" + tokenRead, "QUOTA_TOKEN=" + tokenQuota}, extra...)
}

// appCtx is the context a face mints the ids of tokenApp's creates in:
// its app's, "app" (a keyed create's id is derived from the app too).
var appCtx = tenant.With(context.Background(), tenant.Of("app"))

// stack is Pollux's binaries serving every face on route "sim" (and model
// route "video", over "sim" and "sim2"), the simulated provider behind it.
type stack struct {
	// URL is the front door's base URL (http://127.0.0.1:port).
	URL string
	// JS reaches the stack's NATS server.
	JS jetstream.JetStream
	// Sim is the simulated provider's host:port.
	Sim string
	// Ingest is the ingest process serving the front door; restart it
	// with StartIngest after a kill.
	Ingest *e2etest.Proc
	fleet  *e2etest.SimFleet
	addr   string
	tokens string
}

// hookSecret is the server secret apps' own webhooks are signed under
// (each token's derived from it: signature.DeriveSecret).
const hookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// simConfig is the simulated provider: jobs of a few seconds of model
// time, run 50x faster.
const simConfig = `
time_scale: 50
seed: 7
latency: 5ms
default: {queue_median: 2s, queue_sigma: 0.4, run_median: 20s, run_sigma: 0.3, fail_rate: 0.05}
models:
  openai/sora-content: {queue_median: 2s, run_median: 20s, output_bytes: 4096}
`

// start runs the stack until the test ends.
func start(t *testing.T) *stack {
	t.Helper()
	return startWith(t, simConfig, "", nil)
}

// startWith runs the stack with the simulated provider's configuration
// sim until the test ends; on the NATS server at natsURL, which js
// reaches, when natsURL is not "" (a server the test stops and starts).
func startWith(t *testing.T, sim, natsURL string, js jetstream.JetStream) *stack {
	t.Helper()
	var servers func(string) string
	if natsURL != "" {
		servers = func(string) string { return natsURL }
	}
	// A killed gateway's intake and checks are taken over within seconds,
	// and a create it left in doubt is settled as soon (the tests SIGKILL
	// it).
	f := e2etest.StartSimFleet(t, e2etest.SimFleetConfig{
		Token:     "sim-secret-token",
		TimeScale: 50,
		Sim:       sim,
		NATS:      servers,
		JS:        js,
		Env:       []string{"FACES_HOOK_SECRET=" + hookSecret},
		Config: fmt.Sprintf(`
streams: {intake_ack_wait: 6s, check_ack_wait: 4s}
notify:
  submissions: {secrets_env: [FACES_HOOK_SECRET], allow_private: true, timeout: 2s}
routes:
  sim:
    kind: replicate
    base_url: http://{{sim}}
    token_env: SIM_TOKEN
    workers: {submit: 8, status: 32}
    call_timeout: 2s
    options: {idempotent: true}
    keep_inputs: true
    output_proxy: {allow_private: true}
    faces: [%[1]s]
  sim2:
    kind: replicate
    base_url: http://{{sim}}
    token_env: SIM_TOKEN
    options: {idempotent: true}
    output_proxy: {allow_private: true}
model_routes:
  video:
    members: [{route: sim, model: acme/video}, {route: sim2, model: acme/video}]
    faces: [%[1]s]
`, builtFaces()),
	})
	tokens := filepath.Join(f.Dir, "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte(tokenApp+" act name=app\n"+tokenRead+" read name=reader app=app\n"+tokenQuota+" act name=quota app=app rate=1\n"), 0o600))
	s := &stack{JS: f.JS, Sim: f.SimAddr, fleet: f, addr: fmt.Sprintf("127.0.0.1:%d", e2etest.FreePort(t)), tokens: tokens}
	s.URL = "http://" + s.addr
	f.Launch("poller", "poller")
	s.StartIngest(t)
	return s
}

// builtFaces lists the faces the front door can build (all of them, once
// each face's package is in), for the routes' faces.
func builtFaces() string {
	var kinds []string
	for _, k := range face.Kinds {
		if _, ok := frontdoor.Builders[k]; ok {
			kinds = append(kinds, string(k))
		}
	}
	return strings.Join(kinds, ", ")
}

// StartIngest starts the ingest process with its front door and waits
// until the front door answers.
func (s *stack) StartIngest(t *testing.T) {
	t.Helper()
	s.Ingest = s.launchIngest(t, "ingest")
}

// launchIngest starts an ingest process named name serving the front
// door, with env added to the fleet's, and waits until the front door
// answers (a request without a token refused, so its routes are served).
func (s *stack) launchIngest(t *testing.T, name string, env ...string) *e2etest.Proc {
	t.Helper()
	p := s.fleet.Launch(name, "ingest", append([]string{"POLLUX_HTTP_ADDR=" + s.addr, "POLLUX_HTTP_TOKENS_FILE=" + s.tokens,
		"POLLUX_INPUTS_PUBLIC_URL=" + s.URL}, env...)...)
	e2etest.WaitFor(t, "the front door answering", 30*time.Second, func() bool {
		resp, err := http.Get(s.URL + "/v1/routes")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusUnauthorized
	})
	return p
}

// SimStats is the simulated provider's ground truth.
func (s *stack) SimStats(t *testing.T) sim.Stats { return e2etest.SimStats(t, "http://"+s.Sim) }

// node runs script (a file of examples/sdks) with node and env, and
// returns the JSON lines it printed, decoded; the script fails the test
// by exiting non-zero. It is bounded by timeout.
func node(t *testing.T, script string, timeout time.Duration, env ...string) []map[string]any {
	t.Helper()
	dir := filepath.Join(e2etest.Root(t), "examples", "sdks")
	_, err := os.Stat(filepath.Join(dir, "node_modules", "replicate"))
	require.NoError(t, err, "examples/sdks/node_modules: run make tools (npm ci)")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	require.NoError(t, err, "node %s: %s\n%s", script, errb.String(), tail(out.String()))
	var lines []map[string]any
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		lines = append(lines, m)
	}
	return lines
}

func tail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}

// startCrashingIngest starts the ingest process armed to crash (exit 137,
// as a SIGKILL would) right after a face's first create is durable and
// before it answers, and waits until its front door answers.
func (s *stack) startCrashingIngest(t *testing.T) *e2etest.Proc {
	t.Helper()
	return s.launchIngest(t, "ingest-crashing", "POLLUX_FAULTPOINTS=face-submitted:1")
}

// startNode starts script as node does and returns a function that waits
// for it and returns its JSON lines.
func startNode(t *testing.T, script string, timeout time.Duration, env ...string) func() []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = filepath.Join(e2etest.Root(t), "examples", "sdks")
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Start())
	return func() []map[string]any {
		defer cancel()
		require.NoError(t, cmd.Wait(), "node %s: %s\n%s", script, errb.String(), tail(out.String()))
		var lines []map[string]any
		sc := bufio.NewScanner(&out)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "{") {
				var m map[string]any
				require.NoError(t, json.Unmarshal([]byte(line), &m), line)
				lines = append(lines, m)
			}
		}
		return lines
	}
}

// byField indexes a script's JSON lines by the value of field (each
// script names its lines by "op" or "step").
func byField(field string, lines []map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, l := range lines {
		if v, ok := l[field].(string); ok {
			out[v] = l
		}
	}
	return out
}

// lookup reads job id's record through the front door; nil when there is
// none (yet), or while the gateway restarts.
func (s *stack) lookup(t *testing.T, id string) *state.Job {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL+"/v1/jobs/"+id, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tokenRead)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	var j state.Job
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&j))
	return &j
}

// record is job id's record, which must exist.
func (s *stack) record(t *testing.T, id string) *state.Job {
	t.Helper()
	j := s.lookup(t, id)
	require.NotNil(t, j, "job %s has a record", id)
	return j
}
