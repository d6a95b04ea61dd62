package dev

import (
	"context"
	"encoding/json"
	"net"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/app"
	"github.com/pollux-dev/pollux/internal/config"
	"github.com/pollux-dev/pollux/internal/ingest"
	"github.com/pollux-dev/pollux/internal/metrics"
	"github.com/pollux-dev/pollux/internal/poller"
	"github.com/pollux-dev/pollux/internal/route"
	"github.com/pollux-dev/pollux/internal/webhook"
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
	// Logger receives every component's logs (default: none).
	Logger zerolog.Logger
}

// Stack is the simulated provider and all three services in one process on
// one NATS connection: what `pollux dev` runs, and what the end-to-end tests
// drive.
type Stack struct {
	Env     *app.Env
	Sim     *sim.Server
	SimURL  string
	Metrics *metrics.Metrics
	// SimToken is the simulated account's API token.
	SimToken string
}

// Start starts the simulated provider and the services on nc; they run
// under g until its context ends.
func Start(ctx context.Context, g *errgroup.Group, nc *nats.Conn, sc StackConfig) (*Stack, error) {
	log := sc.Logger
	token := randomHex(16)
	simCfg := sc.Sim
	simCfg.Token = token
	simCfg.Logger = log.With().Str("component", "sim").Logger()
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
	g.Go(func() error { return app.ServeHTTP(ctx, simLn, simSrv.Handler()) })
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
	env, err := app.Open(ctx, g, &config.Config{Routes: map[string]config.Route{RouteName: rc}}, nc, routes, m, log)
	if err != nil {
		_ = hookLn.Close()
		return nil, err
	}
	in, err := ingest.New(ingest.Config{Routes: routes, Logger: log.With().Str("component", "ingest").Logger(),
		Metrics: m.Ingest(), Learned: env.Stats.Lookup, SweepInterval: time.Second}, env.JS, env.NS, env.Res, env.Life, env.Pauses)
	if err != nil {
		_ = hookLn.Close()
		return nil, err
	}
	po, err := poller.New(poller.Config{Routes: routes, Logger: log.With().Str("component", "poller").Logger(), Metrics: m.Poller(), Learned: env.Stats.Lookup},
		env.JS, env.NS, env.Res, env.Life, env.Pauses)
	if err != nil {
		_ = hookLn.Close()
		return nil, err
	}
	wh, err := webhook.New(webhook.Config{Routes: routes, Logger: log.With().Str("component", "webhook").Logger(), Metrics: m.Webhook()},
		env.JS, env.NS, env.Res, env.Life)
	if err != nil {
		_ = hookLn.Close()
		return nil, err
	}
	g.Go(func() error { return in.Run(ctx) })
	g.Go(func() error { return po.Run(ctx) })
	g.Go(func() error { return wh.Run(ctx, hookLn) })
	return &Stack{Env: env, Sim: simSrv, SimURL: simURL, Metrics: m, SimToken: token}, nil
}
