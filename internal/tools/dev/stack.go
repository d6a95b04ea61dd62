package dev

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/edge/console"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/platform/tracing"
	"github.com/pollux-dev/pollux/internal/services/ingest"
	"github.com/pollux-dev/pollux/internal/services/poller"
	"github.com/pollux-dev/pollux/internal/services/webhook"
	"github.com/pollux-dev/pollux/internal/wiring/app"
	"github.com/pollux-dev/pollux/internal/wiring/metrics"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/replicate"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// StackConfig configures a Stack. Zero values mean the defaults on each field.
type StackConfig struct {
	// Sim configures the simulated provider (Token and BaseURL are set by
	// Start).
	Sim sim.Config
	// Route holds the route's settings (Kind and WebhookURL are set by
	// Start).
	Route config.Route
	// NoWebhooks runs the route poll-only.
	NoWebhooks bool
	// Streams sizes the streams and buckets (replicas on a cluster).
	Streams config.Streams
	// HTTPAddr is where the HTTP front door listens (default
	// 127.0.0.1:0, a free loopback port). Without HTTPTokens an address
	// beyond loopback is refused unless HTTPInsecure
	// (frontdoor.CheckExposure).
	HTTPAddr string
	// HTTPTokens are the front door's tokens (nil: none, as on loopback).
	HTTPTokens *frontdoor.Tokens
	// Apps are the apps that share the stack, with their budgets (none:
	// any app a token names, no budget).
	Apps map[string]config.App
	// HTTPInsecure lets a front door without tokens listen beyond
	// loopback (behind a gateway that authenticates).
	HTTPInsecure bool
	// HTTPAllowedHosts are the Host names the front door answers besides
	// localhost and the loopback addresses (frontdoor.Config.AllowedHosts).
	HTTPAllowedHosts []string
	// Logger receives every component's logs (default: none).
	Logger zerolog.Logger
	// Tracer traces the jobs' lives (nil, the default: tracing off; see
	// package tracing).
	Tracer *tracing.Tracer
	// Calls, when set, sees every provider call the process's one set of
	// gates makes — ingest's and the poller's alike — besides their
	// metrics (app.WithCalls). It must not block.
	Calls func(route string, op route.Op, class string, d time.Duration)
}

// Stack is the simulated provider, all three services and the HTTP front
// door (with the jobs index and the console) in one process on one NATS
// connection: what `pollux dev` and `pollux
// serve` run, and what the end-to-end tests drive.
type Stack struct {
	Env     *app.Env
	Sim     *sim.Server
	SimURL  string
	Metrics *metrics.Metrics
	// SimToken is the simulated account's API token.
	SimToken string
	// HTTPURL is the front door's base URL (frontdoor.BaseURL: a
	// loopback one when it listens on every interface).
	HTTPURL string
}

// ConsoleURL is the console's URL on a front door's base URL.
func ConsoleURL(httpURL string) string { return httpURL + "/console/" }

// Start starts the simulated provider and the services on nc; they run
// under g until its context ends.
func Start(ctx context.Context, g *errgroup.Group, nc *nats.Conn, sc StackConfig) (*Stack, error) {
	log := sc.Logger
	token := randomHex(16)
	simCfg := sc.Sim
	simCfg.Token = token
	simCfg.Logger = log.With().Str(logkey.Component, "sim").Logger()
	simLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	simURL := "http://" + simLn.Addr().String()
	simCfg.BaseURL = simURL
	simSrv, err := sim.New(simCfg)
	if err != nil {
		_ = simLn.Close()
		return nil, err
	}
	g.Go(func() error { return app.ServeHTTP(ctx, "simulated provider", simLn, simSrv.Handler()) })
	g.Go(func() error { return simSrv.Run(ctx) })

	hookLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	adapter, err := replicate.New(provider.Config{
		Route: RouteName, Kind: replicate.Kind, BaseURL: simURL, Token: token,
		Options: json.RawMessage(`{"idempotent":true}`),
	})
	if err != nil {
		_ = hookLn.Close()
		return nil, err
	}
	rc := sc.Route
	rc.Kind = replicate.Kind
	if !sc.NoWebhooks {
		rc.WebhookURL = "http://" + hookLn.Addr().String() + "/webhooks/" + RouteName
	}
	r, err := route.New(RouteName, adapter, rc, simCfg.TimeScale)
	if err != nil {
		_ = hookLn.Close()
		return nil, err
	}
	routes := map[string]*route.Route{RouteName: r}
	m := metrics.New()
	env, err := app.Open(ctx, g, &config.Config{Streams: sc.Streams, Routes: map[string]config.Route{RouteName: rc}, Apps: sc.Apps}, nc, routes, m, log, app.WithTracer(sc.Tracer), app.WithCalls(sc.Calls))
	if err != nil {
		_ = hookLn.Close()
		return nil, err
	}
	in, err := ingest.New(ingest.Config{Routes: routes, Spend: env.Spend, Apps: env.Config.AppNames(), Options: env.Options(), Logger: log.With().Str(logkey.Component, "ingest").Logger(),
		Metrics: m.Ingest(), Learned: env.Stats, SweepInterval: time.Second}, env.JS, env.NS, env.Res, env.Jobs.Intake(), env.Gates)
	if err != nil {
		_ = hookLn.Close()
		return nil, err
	}
	po, err := poller.New(poller.Config{Routes: routes, Options: env.Options(), Logger: log.With().Str(logkey.Component, "poller").Logger(), Metrics: m.Poller(), Learned: env.Stats,
		Queue: env.Stats.ObserveQueue, QueueRate: env.Stats.QueueRate},
		env.JS, env.NS, env.Res, env.Jobs.Polls(), env.Gates)
	if err != nil {
		_ = hookLn.Close()
		return nil, err
	}
	wh, err := webhook.New(webhook.Config{Routes: routes, Options: env.Options(), Logger: log.With().Str(logkey.Component, "webhook").Logger(), Metrics: m.Webhook()},
		env.JS, env.NS, env.Res, env.Jobs.Webhooks())
	if err != nil {
		_ = hookLn.Close()
		return nil, err
	}
	httpLn, err := frontdoor.Listen(cmp.Or(sc.HTTPAddr, "127.0.0.1:0"), sc.HTTPTokens != nil, sc.HTTPInsecure)
	if err != nil {
		_ = hookLn.Close()
		return nil, err
	}
	// The simulated provider reaches the front door where it listens: the
	// input files the faces take go to it as signed URLs there.
	if _, err := env.UseInputs(ctx, app.InputsFlags{PublicURL: "http://" + httpLn.Addr().String()}); err != nil {
		_ = hookLn.Close()
		_ = httpLn.Close()
		return nil, err
	}
	fd, err := env.FrontDoor(ctx, g, frontdoor.Config{
		Tokens: sc.HTTPTokens, AllowedHosts: sc.HTTPAllowedHosts, Console: console.Handler(), Logger: log.With().Str(logkey.Component, "frontdoor").Logger(),
	})
	if err != nil {
		_ = hookLn.Close()
		_ = httpLn.Close()
		return nil, err
	}
	g.Go(func() error {
		// Ingest and the poller share the process's gates: their idle
		// leases go back once both have stopped.
		sg, sctx := errgroup.WithContext(ctx)
		sg.Go(func() error { return in.Run(sctx) })
		sg.Go(func() error { return po.Run(sctx) })
		err := sg.Wait()
		env.Close()
		return err
	})
	g.Go(func() error { return wh.Run(ctx, hookLn) })
	g.Go(func() error { return fd.Run(ctx, httpLn) })
	return &Stack{Env: env, Sim: simSrv, SimURL: simURL, Metrics: m, SimToken: token, HTTPURL: frontdoor.BaseURL(httpLn.Addr())}, nil
}

// ServeConfig configures Serve. Zero values mean the defaults on each field.
type ServeConfig struct {
	// NATSURL uses an external NATS server; "" runs an embedded one.
	NATSURL string
	// NATSAddr is where the embedded NATS server listens (default
	// 127.0.0.1:4222, NATS's own default, so that clients reach it
	// without being told; a port of 0 picks a free one). An address
	// already taken is an error that says so.
	NATSAddr string
	// NATSInsecure lets the embedded NATS server, which has no
	// authentication, listen beyond loopback; refused otherwise (anyone
	// reaching it could submit, cancel and read every job).
	NATSInsecure bool
	// DataDir holds the embedded server's JetStream files; "" uses a
	// temporary directory removed at the end.
	DataDir string
	// TimeScale compresses the simulated provider's time (default 20).
	TimeScale float64
	// HTTPAddr is where the front door listens (default 127.0.0.1:8081).
	// Without HTTPTokens an address beyond loopback is refused unless
	// HTTPInsecure (frontdoor.CheckExposure), before anything starts.
	HTTPAddr string
	// HTTPTokens are the front door's tokens (nil: none).
	HTTPTokens *frontdoor.Tokens
	// HTTPInsecure lets a front door without tokens listen beyond
	// loopback.
	HTTPInsecure bool
	// HTTPAllowedHosts are the Host names the front door answers besides
	// localhost and the loopback addresses.
	HTTPAllowedHosts []string
	// MetricsAddr is where the services' Prometheus metrics are served
	// (/metrics, with /healthz and /readyz, as every binary serves them;
	// default 127.0.0.1:9101).
	MetricsAddr string
	// NoWebhooks runs the route poll-only.
	NoWebhooks bool
	// Logger receives the services' logs (default: none).
	Logger zerolog.Logger
}

// The defaults of ServeConfig's addresses.
const (
	DefaultNATSAddr    = "127.0.0.1:4222"
	DefaultHTTPAddr    = "127.0.0.1:8081"
	DefaultMetricsAddr = "127.0.0.1:9101"
)

// Endpoints are where a served stack answers.
type Endpoints struct {
	// NATSURL is the NATS server's URL.
	NATSURL string
	// HTTPURL is the front door's base URL (the console is at
	// ConsoleURL(HTTPURL)).
	HTTPURL string
	// MetricsURL is the URL of the Prometheus metrics.
	MetricsURL string
}

// Env returns the endpoints as shell assignments, one a line, of the
// variables their clients read: POLLUX_NATS_URL (the pollux commands),
// NATS_URL (the nats CLI and the examples), POLLUX_HTTP_URL (the
// examples' front door).
func (e Endpoints) Env() string {
	return fmt.Sprintf("POLLUX_NATS_URL=%s\nNATS_URL=%s\nPOLLUX_HTTP_URL=%s\n", e.NATSURL, e.NATSURL, e.HTTPURL)
}

// Serve runs the stack with the demo's models and faults and no workload
// until ctx ends, for clients to use, with its metrics served: started is
// called with its endpoints once everything runs.
func Serve(ctx context.Context, cfg ServeConfig, started func(Endpoints, *Stack)) error {
	cfg.TimeScale = cmp.Or(cfg.TimeScale, 20)
	if cfg.TimeScale < 1 || cfg.TimeScale > 10_000 {
		return fmt.Errorf("time scale: %v is not between 1 and 10000", cfg.TimeScale)
	}
	cfg.NATSAddr = cmp.Or(cfg.NATSAddr, DefaultNATSAddr)
	cfg.HTTPAddr = cmp.Or(cfg.HTTPAddr, DefaultHTTPAddr)
	if err := errors.Join(frontdoor.CheckAllowedHosts(cfg.HTTPAllowedHosts),
		frontdoor.CheckExposure(cfg.HTTPAddr, cfg.HTTPTokens != nil, cfg.HTTPInsecure),
		checkNATSExposure(cfg)); err != nil {
		return err
	}
	metricsAddr := cmp.Or(cfg.MetricsAddr, DefaultMetricsAddr)
	metricsLn, err := net.Listen("tcp", metricsAddr)
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("metrics address %s: %w: listen elsewhere with --metrics-addr (port 0 picks a free one)", metricsAddr, syscall.EADDRINUSE)
	case err != nil:
		return fmt.Errorf("metrics listener: %w", err)
	}
	defer func() { _ = metricsLn.Close() }()
	url, stopNATS, err := startNATS(Config{NATSURL: cfg.NATSURL, DataDir: cfg.DataDir}, cfg.NATSAddr)
	if err != nil {
		return err
	}
	defer stopNATS()
	nc, err := app.Connect(url, "pollux-serve", nil, cfg.Logger)
	if err != nil {
		return err
	}
	defer nc.Close()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(runCtx)
	models, faults := DefaultModels(), DefaultFaults()
	stack, err := Start(gctx, g, nc, StackConfig{
		Sim: sim.Config{Models: models, Default: models["pollux-demo/standard"], TimeScale: cfg.TimeScale, Faults: faults},
		// Every provider face, so an app on a provider's SDK tries Pollux
		// by its base URL (docs/faces.md).
		Route:      config.Route{Workers: config.Workers{Submit: 8, Status: 32}, KeepInputs: true, Faces: config.FaceKinds},
		NoWebhooks: cfg.NoWebhooks,
		HTTPAddr:   cfg.HTTPAddr, HTTPTokens: cfg.HTTPTokens, HTTPInsecure: cfg.HTTPInsecure, HTTPAllowedHosts: cfg.HTTPAllowedHosts,
		Logger: cfg.Logger,
	})
	if err != nil {
		cancel()
		_ = g.Wait()
		return err
	}
	g.Go(func() error { return app.ServeHTTP(gctx, "metrics", metricsLn, app.Observability(stack.Metrics, nc)) })
	started(Endpoints{NATSURL: url, HTTPURL: stack.HTTPURL, MetricsURL: "http://" + metricsLn.Addr().String() + "/metrics"}, stack)
	if err := g.Wait(); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// checkNATSExposure refuses an embedded NATS server, which has no
// authentication, on an address beyond loopback unless NATSInsecure says
// so: anyone reaching it could publish submissions and cancels and read
// every job's record.
func checkNATSExposure(cfg ServeConfig) error {
	if cfg.NATSURL != "" || cfg.NATSInsecure {
		return nil
	}
	local, err := frontdoor.OnLoopback(cfg.NATSAddr)
	switch {
	case err != nil:
		return fmt.Errorf("--nats-addr %w", err)
	case !local:
		return errors.New("--nats-addr " + cfg.NATSAddr + " listens beyond loopback and the embedded NATS server has no authentication: " +
			"listen on 127.0.0.1, run your own NATS server with users (--nats-url, deploy/nats), " +
			"or set --nats-insecure (POLLUX_NATS_INSECURE) on a network only you reach")
	}
	return nil
}
