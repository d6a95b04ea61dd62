package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/user"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/internal/tools/bench"
	"github.com/pollux-dev/pollux/internal/tools/cli"
	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// nowhere is a NATS URL nothing listens on: a command that connects fails.
const nowhere = "nats://127.0.0.1:1"

// output is a writer safe for a command and the test to share.
type output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// pollux parses args as the pollux command line and runs the command,
// writing to stdout and stderr.
func pollux(t *testing.T, stdout, stderr *output, args ...string) error {
	t.Helper()
	var c cli.CLI
	k, err := kong.New(&c, kong.Name("pollux"), kong.Exit(func(int) { t.Fatalf("pollux %v exited", args) }))
	require.NoError(t, err)
	kctx, err := k.Parse(args)
	if err != nil {
		return err
	}
	return kctx.Run(&cli.Globals{Stdout: stdout, Stderr: stderr, Log: zerolog.Nop()})
}

// run is pollux with output kept apart; it returns stdout.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr output
	err := pollux(t, &stdout, &stderr, args...)
	return stdout.String(), err
}

// fleet runs the simulated provider and the services for route "sim" on
// an embedded server until the test ends, and returns the server's URL.
func fleet(t *testing.T) string {
	t.Helper()
	return fleetStack(t).url
}

// stack is a fleet: the server's URL and the services.
type stack struct {
	url string
	*dev.Stack
}

// fleetStack is fleet, with the services returned too. Model "owner/slow"
// takes an hour.
func fleetStack(t *testing.T) stack {
	t.Helper()
	srv := natstest.Server(t)
	nc, _ := natstest.Connect(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	t.Cleanup(func() {
		cancel()
		require.NoError(t, g.Wait())
	})
	quick := sim.Model{QueueMedian: sim.Duration(50 * time.Millisecond), RunMedian: sim.Duration(200 * time.Millisecond)}
	slow := sim.Model{QueueMedian: sim.Duration(50 * time.Millisecond), RunMedian: sim.Duration(time.Hour)}
	st, err := dev.Start(gctx, g, nc, dev.StackConfig{Sim: sim.Config{Default: quick, Models: map[string]sim.Model{"owner/slow": slow}}})
	require.NoError(t, err)
	return stack{url: srv.ClientURL(), Stack: st}
}

// interrupt sends SIGINT to the test process, as Ctrl-C does: a command
// running (within signal.NotifyContext) ends. Only a test that does not
// run in parallel may call it.
func interrupt(t *testing.T) {
	t.Helper()
	require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGINT))
}

// A submission to a mistyped route is rejected (by ingest's sweep of
// unserved routes), and `submit --wait` reports the rejection as an error
// as soon as it comes, instead of waiting out --wait-timeout.
func TestSubmitWaitReportsARejection(t *testing.T) {
	t.Parallel()
	url := fleet(t)
	out, err := run(t, "submit", "--nats-url", url, "--route", "simm", "--model", "m", "--idempotency-key", "typo-1", "--wait")
	require.ErrorIs(t, err, cli.ErrRejected)
	require.ErrorContains(t, err, `no route named "simm"`)
	require.Contains(t, out, "rejected")
}

// `submit --wait` with no ingest taking the route's submissions says so,
// early on stderr and again when it gives up, instead of a silent wait.
func TestSubmitWaitSaysWhenNoIngestIsRunning(t *testing.T) {
	t.Parallel()
	srv := natstest.Server(t)
	_, js := natstest.Connect(t, srv)
	ns, err := events.NewNamespace("pollux")
	require.NoError(t, err)
	ctx := context.Background()
	res, err := ns.Setup(ctx, js, events.Options{MemoryStorage: true})
	require.NoError(t, err)
	submit := func(id string) (string, error) {
		var stdout, stderr output
		err := pollux(t, &stdout, &stderr, "submit", "--nats-url", srv.ClientURL(), "--route", "sim", "--model", "m",
			"--id", id, "--wait", "--wait-notice", "50ms", "--wait-timeout", "1s")
		return stderr.String(), err
	}

	stderr, err := submit("never-1")
	require.ErrorContains(t, err, "gave up waiting for job never-1")
	require.ErrorContains(t, err, "no ingest has served route sim")
	require.Contains(t, stderr, "no event for job never-1 after 50ms: no ingest has served route sim")

	// An ingest ran once (its consumer exists) but none is pulling now.
	_, err = res.Intake.CreateConsumer(ctx, ns.IngestConsumerConfig("sim", events.Options{}))
	require.NoError(t, err)
	stderr, err = submit("never-2")
	require.ErrorContains(t, err, "no ingest is taking route sim's submissions")
	require.Contains(t, stderr, "waiting, none pulling")
}

// `submit --wait` ends with the job: nil when it succeeded.
func TestSubmitWaitEndsWithTheJob(t *testing.T) {
	t.Parallel()
	url := fleet(t)
	out, err := run(t, "submit", "--nats-url", url, "--route", dev.RouteName, "--model", "owner/model", "--idempotency-key", "ok-1", "--wait")
	require.NoError(t, err)
	require.Contains(t, out, "succeeded")
}

// Flags are checked before connecting, and the error names the flag and
// the problem.
func TestSubmitChecksItsFlagsBeforeConnecting(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"input not JSON":     {[]string{"--input", "notjson"}, "--input: not JSON"},
		"input not a object": {[]string{"--input", "[1]"}, "--input: must be a JSON object"},
		"route":              {[]string{"--route", "sim.x"}, `--route: "sim.x" is not a route name`},
		"id":                 {[]string{"--id", "bad id!"}, "--id: "},
		"negative timeout":   {[]string{"--timeout=-1s"}, "--timeout: must not be negative"},
		"zero wait timeout":  {[]string{"--wait", "--wait-timeout", "0s"}, "--wait-timeout: must be greater than 0"},
	} {
		args := append([]string{"submit", "--nats-url", nowhere, "--route", "sim", "--model", "m"}, tc.args...)
		_, err := run(t, args...)
		require.ErrorContains(t, err, tc.want, name)
		require.NotContains(t, err.Error(), "connect", name)
	}
}

// An invalid id is called invalid, before connecting; an unknown one is
// not found.
func TestGetNamesAnInvalidID(t *testing.T) {
	t.Parallel()
	_, err := run(t, "get", "--nats-url", nowhere, "bad id!")
	require.ErrorContains(t, err, `"bad id!" is not a valid job id`)
	require.NotContains(t, err.Error(), "not found")

	url := fleet(t)
	_, err = run(t, "get", "--nats-url", url, "k-nosuchjob")
	require.ErrorContains(t, err, "no job k-nosuchjob")
}

// `get` of a finished job shows no next check; of a rejected submission,
// its rejection.
func TestGetOfAFinishedJob(t *testing.T) {
	t.Parallel()
	url := fleet(t)
	out, err := run(t, "submit", "--nats-url", url, "--route", dev.RouteName, "--model", "owner/model", "--id", "done-1", "--wait")
	require.NoError(t, err, out)
	out, err = run(t, "get", "--nats-url", url, "done-1")
	require.NoError(t, err)
	require.Contains(t, out, `"state": "succeeded"`)
	require.NotContains(t, out, "next_check_at")
	require.NotContains(t, out, "outbound webhooks", "none configured")

	// Its deliveries to an application's endpoint, as package notify
	// records them, are shown too.
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	kv, err := events.EnsureBucket(t.Context(), js, events.Default.OutboxBucketConfig(events.Options{}))
	require.NoError(t, err)
	d, _ := json.Marshal(events.OutboxDelivery{Endpoint: "app", State: events.OutboxDelivering, Seq: 3, Attempts: 2, Total: 4, Last: "HTTP 503", LastAt: time.Now()})
	_, err = kv.Put(t.Context(), events.OutboxKey("done-1", "app"), d)
	require.NoError(t, err)
	out, err = run(t, "get", "--nats-url", url, "done-1")
	require.NoError(t, err)
	require.Contains(t, out, "outbound webhooks:")
	require.Regexp(t, `app +delivering +event #3, 2 attempt\(s\) \(4 in all\), last .*: HTTP 503`, out)

	_, err = run(t, "submit", "--nats-url", url, "--route", "simm", "--model", "m", "--id", "typo-2", "--wait")
	require.ErrorIs(t, err, cli.ErrRejected)
	_, err = run(t, "get", "--nats-url", url, "typo-2")
	require.ErrorContains(t, err, `no job typo-2: its submit was rejected: route: no route named "simm"`)
}

// A numeric flag whose zero would silently mean its default refuses it.
func TestZeroIsRefusedWhereItWouldMeanTheDefault(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"dev", "--nats-url", nowhere, "--jobs", "0"},
		{"dev", "--nats-url", nowhere, "--time-scale", "0"},
		{"dev", "--nats-url", nowhere, "--timeout", "0s"},
		{"serve", "--nats-url", nowhere, "--time-scale", "0"},
		{"watch", "--nats-url", nowhere, "--every", "0s"},
		{"simulate", "--jobs", "0"},
		{"simulate", "--poll-cost", "0s"},
		{"simulate", "--max-delay", "0s"},
		{"simulate", "--seed", "0"},
		{"sim-provider", "--time-scale", "0"},
	} {
		_, err := run(t, args...)
		require.ErrorContains(t, err, args[len(args)-2]+": must be greater than 0", "%v", args)
	}
}

// sim-provider's seed of 0 would mean "random", not the seed asked for.
func TestSimProviderRefusesSeedZero(t *testing.T) {
	t.Parallel()
	_, err := run(t, "sim-provider", "--seed", "0")
	require.ErrorContains(t, err, "--seed: must not be 0")
}

// `serve` listens on NATS's default port unless told otherwise, so a
// second terminal reaches it with the CLI's default URL.
func TestServeDefaultsToNATSsPort(t *testing.T) {
	t.Parallel()
	var c cli.CLI
	k, err := kong.New(&c)
	require.NoError(t, err)
	_, err = k.Parse([]string{"serve"})
	require.NoError(t, err)
	require.Equal(t, dev.DefaultNATSAddr, c.Serve.NATSAddr)
	_, err = k.Parse([]string{"get", "x"})
	require.NoError(t, err)
	require.Equal(t, "nats://"+dev.DefaultNATSAddr, c.Get.NATSURL, "the client commands' default")
}

// `serve` prints the variable the client commands read, with the URL of
// its NATS server, and serves the services' metrics (run alone: it ends
// with SIGINT).
func TestServePrintsWhatTheClientsRead(t *testing.T) {
	var stdout, stderr output
	done := make(chan error, 1)
	dir := t.TempDir() // not from the goroutine: t's methods belong to the test's
	go func() {
		done <- pollux(t, &stdout, &stderr, "serve", "--nats-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
			"--metrics-addr", "127.0.0.1:0", "--data-dir", dir)
	}()
	var url string
	require.Eventually(t, func() bool {
		for line := range strings.Lines(stdout.String()) {
			if v, ok := strings.CutPrefix(line, "POLLUX_NATS_URL="); ok {
				url = strings.TrimSpace(v)
			}
		}
		return url != ""
	}, 30*time.Second, 20*time.Millisecond, "stdout: %s\nstderr: %s", &stdout, &stderr)
	_, err := run(t, "stats", "--nats-url", url)
	require.NoError(t, err, "a client command reaches the printed URL")
	var metrics string
	for line := range strings.Lines(stderr.String()) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "metrics"); ok {
			metrics = strings.TrimSpace(v)
		}
	}
	require.True(t, strings.HasSuffix(metrics, "/metrics"), "stderr: %s", &stderr)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, metrics, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, errors.Join(err, resp.Body.Close()))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "pollux_")
	interrupt(t)
	require.NoError(t, <-done)
}

// `watch` writes no screen-clearing codes when its output is not a
// terminal: one plain report after another (run alone: it ends with
// SIGINT).
func TestWatchPrintsPlainTextWhenNotATerminal(t *testing.T) {
	url := fleet(t)
	var stdout, stderr output
	done := make(chan error, 1)
	go func() { done <- pollux(t, &stdout, &stderr, "watch", "--nats-url", url, "--every", "10ms") }()
	require.Eventually(t, func() bool { return strings.Count(stdout.String(), "Pollux fleet") >= 2 },
		30*time.Second, 10*time.Millisecond, "two reports: %s", &stdout)
	interrupt(t)
	require.NoError(t, <-done)
	require.NotContains(t, stdout.String(), "\033")
	require.NotContains(t, stdout.String(), "Ctrl-C")
}

// `track` follows a job submitted elsewhere to its end.
func TestTrackFollowsAJobSubmittedElsewhere(t *testing.T) {
	t.Parallel()
	f := fleetStack(t)
	req, err := http.NewRequest(http.MethodPost, f.SimURL+"/v1/predictions", strings.NewReader(`{"version":"owner/model","input":{}}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+f.SimToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var p struct{ ID string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	_ = resp.Body.Close()
	require.NotEmpty(t, p.ID)

	out, err := run(t, "track", "--nats-url", f.url, "--route", dev.RouteName, "--remote-id", p.ID, "--model", "owner/model", "--wait")
	require.NoError(t, err, out)
	require.Contains(t, out, "tracking job ")
	require.Contains(t, out, "succeeded")

	_, err = run(t, "track", "--nats-url", nowhere, "--route", dev.RouteName, "--remote-id", "", "--model", "m")
	require.ErrorContains(t, err, "--remote-id: ", "checked before connecting")
}

// `cancel` finds the job's route, and with --wait ends when it is canceled;
// a job that ended, or none, is an error that says so.
func TestCancelEndsAJob(t *testing.T) {
	t.Parallel()
	url := fleet(t)
	out, err := run(t, "submit", "--nats-url", url, "--route", dev.RouteName, "--model", "owner/slow", "--id", "slow-1")
	require.NoError(t, err, out)
	out, err = run(t, "cancel", "--nats-url", url, "slow-1", "--reason", "changed my mind", "--wait")
	require.NoError(t, err, out)
	require.Contains(t, out, "canceled")
	out, err = run(t, "get", "--nats-url", url, "slow-1")
	require.NoError(t, err)
	require.Contains(t, out, "changed my mind")

	_, err = run(t, "cancel", "--nats-url", url, "slow-1")
	require.ErrorContains(t, err, "job slow-1 has ended already: canceled")
	_, err = run(t, "cancel", "--nats-url", url, "nosuch")
	require.ErrorContains(t, err, "no job nosuch")
	_, err = run(t, "cancel", "--nats-url", nowhere, "bad id!")
	require.ErrorContains(t, err, `"bad id!" is not a valid job id`)
}

// `routes` lists the routes; `routes pause` and `routes resume` hold and
// free a route across the fleet, say who and why, and record both as the
// route's events; a route no poller serves is refused.
func TestRoutesPauseAndResume(t *testing.T) {
	t.Parallel()
	f := fleetStack(t)
	out, err := run(t, "routes", "--nats-url", f.url)
	require.NoError(t, err)
	require.Regexp(t, `(?m)^`+dev.RouteName+`\s+running\s`, out)

	out, err = run(t, "routes", "pause", "--nats-url", f.url, dev.RouteName, "--by", "alice", "--reason", "provider incident")
	require.NoError(t, err, out)
	require.Contains(t, out, "paused by alice until resumed")
	out, err = run(t, "routes", "list", "--nats-url", f.url)
	require.NoError(t, err)
	require.Contains(t, out, "paused by alice: provider incident")
	require.Positive(t, f.Env.Pauses.Hold(f.Env.Routes[dev.RouteName]), "the services hold the route's calls")
	ev := lastRouteEvent(t, f)
	require.Equal(t, events.EventRoutePaused, ev.Type)
	require.Equal(t, "alice", ev.By)
	require.Equal(t, "provider incident", ev.Reason)

	out, err = run(t, "routes", "resume", "--nats-url", f.url, dev.RouteName, "--by", "bob")
	require.NoError(t, err, out)
	require.Contains(t, out, "resumed by bob (paused by alice since")
	ev = lastRouteEvent(t, f)
	require.Equal(t, events.EventRouteResumed, ev.Type)
	require.Equal(t, "bob", ev.By)
	require.Eventually(t, func() bool { return f.Env.Pauses.Hold(f.Env.Routes[dev.RouteName]) == 0 }, 5*time.Second, 10*time.Millisecond)
	out, err = run(t, "submit", "--nats-url", f.url, "--route", dev.RouteName, "--model", "owner/model", "--wait")
	require.NoError(t, err, out)

	_, err = run(t, "routes", "resume", "--nats-url", f.url, dev.RouteName)
	require.ErrorContains(t, err, "has no operator's pause in force")
	_, err = run(t, "routes", "pause", "--nats-url", f.url, "simm")
	require.ErrorContains(t, err, `no poller serves route "simm" (routes: `+dev.RouteName+`)`)
}

func lastRouteEvent(t *testing.T, f stack) *events.RouteEvent {
	t.Helper()
	s, err := f.Env.JS.Stream(context.Background(), f.Env.NS.EventsStream())
	require.NoError(t, err)
	m, err := s.GetLastMsgForSubject(context.Background(), f.Env.NS.RouteEvent(dev.RouteName))
	require.NoError(t, err)
	ev, err := events.DecodeRouteEvent(m.Data)
	require.NoError(t, err)
	return ev
}

// pollux bench --help names every section --only accepts.
func TestBenchHelpNamesEverySection(t *testing.T) {
	t.Parallel()
	f, ok := reflect.TypeFor[cli.BenchCmd]().FieldByName("Only")
	require.True(t, ok)
	for _, s := range bench.Sections {
		require.Contains(t, f.Tag.Get("help"), s)
	}
}

// A pause or resume without --by is recorded as the user running pollux,
// even where $USER is not set (cron, a container's exec).
func TestOperatorDefaultsToTheUser(t *testing.T) {
	u, err := user.Current()
	require.NoError(t, err)
	t.Setenv("USER", "")
	require.Equal(t, u.Username, cli.Operator(""))
	require.Equal(t, "carol", cli.Operator("carol"))
	t.Setenv("USER", "dave")
	require.Equal(t, "dave", cli.Operator(""))
}
