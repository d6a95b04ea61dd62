// Package dev is `pollux dev`: the whole of Pollux in one process — an
// embedded NATS server with JetStream on disk (or an external server), the
// simulated provider, ingest, poller and webhook — driving a demo workload
// through the real services in compressed time and ending with a summary of
// how well it tracked the jobs, checked against the simulator's ground truth.
package dev

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/platform/embedded"
	"github.com/pollux-dev/pollux/internal/wiring/app"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// RouteName is the demo's route.
const RouteName = "sim"

// Config configures a dev run. Zero values mean the defaults on each field.
type Config struct {
	// NATSURL uses an external NATS server; "" runs an embedded one.
	NATSURL string
	// DataDir holds the embedded server's JetStream files; "" uses a
	// temporary directory removed at the end.
	DataDir string
	// Jobs is the number of demo jobs (default 200).
	Jobs int
	// TimeScale compresses the demo's model time (default 20: a 60 s
	// generation takes 3 s).
	TimeScale float64
	// Spread is the real time over which the jobs are submitted (default
	// 15s).
	Spread time.Duration
	// DuplicateRate is the share of submissions published twice (default
	// 0.1), to show that each is submitted once.
	DuplicateRate float64
	// Models are the simulated models (default: DefaultModels).
	Models map[string]sim.Model
	// Faults are the simulated provider's faults (default: DefaultFaults).
	Faults *sim.Faults
	// Timeout bounds the wait for every job to finish (default 5m).
	Timeout time.Duration
	// Seed makes the simulation reproducible (default: random).
	Seed int64
	// StatusWorkers is the poller's concurrency (default 32).
	StatusWorkers int
	// NoWebhooks runs the demo poll-only, so the summary's comparison with
	// a fixed-interval poller measures the schedule alone.
	NoWebhooks bool
	// Progress receives the live progress line (default: none).
	Progress io.Writer
	// ProgressInPlace redraws the progress line in place (for a terminal).
	ProgressInPlace bool
	// Logger receives the services' logs (default: none).
	Logger zerolog.Logger
}

// DefaultModels are the demo's models, in model time.
func DefaultModels() map[string]sim.Model {
	d := func(t time.Duration) sim.Duration { return sim.Duration(t) }
	return map[string]sim.Model{
		"pollux-demo/preview":  {QueueMedian: d(3 * time.Second), QueueSigma: 0.4, RunMedian: d(20 * time.Second), RunSigma: 0.3, FailRate: 0.03},
		"pollux-demo/standard": {QueueMedian: d(5 * time.Second), QueueSigma: 0.4, RunMedian: d(70 * time.Second), RunSigma: 0.35, FailRate: 0.05},
		"pollux-demo/long":     {QueueMedian: d(10 * time.Second), QueueSigma: 0.4, RunMedian: d(4 * time.Minute), RunSigma: 0.3, FailRate: 0.05},
		"pollux-demo/flaky":    {QueueMedian: d(5 * time.Second), QueueSigma: 0.6, RunMedian: d(90 * time.Second), RunSigma: 0.6, FailRate: 0.2},
	}
}

// DefaultFaults are the demo's injected faults.
func DefaultFaults() sim.Faults {
	return sim.Faults{
		RateLimitRate: 0.003, RetryAfter: sim.Duration(time.Second),
		ServerErrorRate: 0.01, LostRate: 0.01,
		WebhookMissingRate: 0.1, WebhookDuplicateRate: 0.1, WebhookLateRate: 0.05,
		WebhookLateBy: sim.Duration(2 * time.Second),
	}
}

func (c Config) withDefaults() Config {
	c.Jobs = cmp.Or(c.Jobs, 200)
	c.TimeScale = cmp.Or(c.TimeScale, 20)
	c.Spread = cmp.Or(c.Spread, 15*time.Second)
	if c.DuplicateRate == 0 {
		c.DuplicateRate = 0.1
	}
	if c.Models == nil {
		c.Models = DefaultModels()
	}
	if c.Faults == nil {
		f := DefaultFaults()
		c.Faults = &f
	}
	c.Timeout = cmp.Or(c.Timeout, 5*time.Minute)
	c.StatusWorkers = cmp.Or(c.StatusWorkers, 32)
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

// Run runs the demo and returns its summary. A summary is returned with
// ErrIncomplete when some jobs did not finish in time or the run was
// interrupted.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	cfg = cfg.withDefaults()
	if cfg.Jobs < 1 || cfg.Jobs > 100_000 {
		return nil, fmt.Errorf("jobs: %d is not between 1 and 100000", cfg.Jobs)
	}
	if cfg.TimeScale < 1 || cfg.TimeScale > 10_000 {
		return nil, fmt.Errorf("time scale: %v is not between 1 and 10000", cfg.TimeScale)
	}
	log := cfg.Logger

	url, stopNATS, err := startNATS(cfg, "")
	if err != nil {
		return nil, err
	}
	defer stopNATS()
	nc, err := app.Connect(url, "pollux-dev", nil, log)
	if err != nil {
		return nil, err
	}
	defer nc.Close()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(runCtx)
	defer func() { cancel(); _ = g.Wait() }()

	stack, err := Start(gctx, g, nc, StackConfig{
		Sim: sim.Config{Models: cfg.Models, Default: cfg.Models["pollux-demo/standard"],
			TimeScale: cfg.TimeScale, Seed: cfg.Seed, Faults: *cfg.Faults},
		Route:      config.Route{Workers: config.Workers{Submit: 8, Status: cfg.StatusWorkers}, Faces: config.FaceKinds},
		NoWebhooks: cfg.NoWebhooks,
		Logger:     log,
	})
	if err != nil {
		return nil, err
	}
	env, simSrv := stack.Env, stack.Sim
	fmt.Fprintf(cfg.Progress, "console (while the demo runs): %s\n", ConsoleURL(stack.HTTPURL))

	w := &workload{cfg: cfg, env: env, run: "demo-" + randomHex(3)}
	tracker, err := newTracker(gctx, env, w.run)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	g.Go(func() error { return w.submit(gctx) })
	waitErr := tracker.wait(gctx, cfg, w, start)
	elapsed := time.Since(start)

	sum, err := summarize(context.WithoutCancel(ctx), env, w, simSrv, cfg, elapsed)
	if err != nil {
		return nil, err
	}
	return sum, waitErr
}

// ErrIncomplete is returned when not every job finished.
var ErrIncomplete = errors.New("not every job finished")

// startNATS returns cfg's NATS server, else starts an embedded one
// listening on addr ("": a free loopback port). An address already taken
// is reported as such, before the server is started.
func startNATS(cfg Config, addr string) (url string, stop func(), err error) {
	if cfg.NATSURL != "" {
		return cfg.NATSURL, func() {}, nil
	}
	host, port, err := listenAddr(addr)
	if err != nil {
		return "", nil, err
	}
	dir, cleanup := cfg.DataDir, func() {}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "pollux-dev-")
		if err != nil {
			return "", nil, err
		}
		dir, cleanup = tmp, func() { _ = os.RemoveAll(tmp) }
	}
	s, err := embedded.Start(embedded.Config{StoreDir: dir, Host: host, Port: port})
	if err != nil {
		cleanup()
		return "", nil, err
	}
	return s.ClientURL(), func() {
		s.Shutdown()
		s.WaitForShutdown()
		cleanup()
	}, nil
}

// listenAddr splits the embedded server's address into the host and port
// embedded.Config takes (-1: a free port), after making sure a fixed port
// is free: the server itself would only fail to become ready.
func listenAddr(addr string) (host string, port int, err error) {
	if addr == "" {
		return "127.0.0.1", -1, nil
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("NATS address %q: %w", addr, err)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("NATS address %q: the port is not a number between 0 and 65535", addr)
	}
	if port == 0 {
		return h, -1, nil
	}
	ln, err := net.Listen("tcp", addr)
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return "", 0, fmt.Errorf("NATS address %s: %w (another NATS server, or another pollux serve?): "+
			"use that server with --nats-url, or listen elsewhere with --nats-addr (port 0 picks a free one)", addr, syscall.EADDRINUSE)
	case err != nil:
		return "", 0, fmt.Errorf("NATS listener: %w", err)
	}
	_ = ln.Close()
	return h, port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
