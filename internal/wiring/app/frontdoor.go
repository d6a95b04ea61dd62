package app

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/edge/census"
	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/edge/index"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/signature"
)

// Census samples the fleet as this process sees it: its routes and their
// budget levels.
func (e *Env) Census(ctx context.Context) (*census.Snapshot, error) {
	return census.Take(ctx, e.NS, e.Res, e.RouteNames(), e.Levels()...)
}

// FrontDoor builds the HTTP front door of the environment's routes, with
// everything its endpoints read: a jobs index over the events stream (run
// under g until ctx ends, and caught up before FrontDoor returns), the
// route pauses, the census, the learned durations and the routes'
// schedules; and its intake connection, without a reconnect buffer
// (IntakeConn; Close closes it). cfg gives the rest: tokens, the
// console, the logger.
func (e *Env) FrontDoor(ctx context.Context, g *errgroup.Group, cfg frontdoor.Config) (*frontdoor.Server, error) {
	if e.intake == nil {
		nc, err := IntakeConn(e.NC)
		if err != nil {
			return nil, err
		}
		e.intake = nc
	}
	intake, err := jetstream.New(e.intake)
	if err != nil {
		return nil, err
	}
	cfg.Intake = intake
	x, err := index.New(index.Config{Logger: cfg.Logger}, e.JS, e.NS, e.Res)
	if err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	g.Go(func() error { return x.Run(ctx, ready) })
	select {
	case <-ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("loading the jobs index: %w", ctx.Err())
	}
	policies := make(map[string]schedule.Policy, len(e.Routes))
	for name, r := range e.Routes {
		policies[name] = r.Policy
		if r.WebhookURL != "" {
			cfg.WebhookRoutes = append(cfg.WebhookRoutes, name)
		}
	}
	cfg.Routes, cfg.Index, cfg.Pauses, cfg.Census = e.RouteNames(), x, e.Pauses, e.Census
	for name := range e.ModelRoutes {
		cfg.ModelRoutes = append(cfg.ModelRoutes, name)
	}
	cfg.Policies = policies
	cfg.Faces, cfg.KeepOutputs, cfg.Inputs, cfg.Spend = e.Faces(), e.KeepOutputs(), e.inputs, e.Spend
	cfg.OutputProxies = e.OutputProxies()
	if e.Config != nil {
		cfg.Apps = e.Config.AppNames()
		for _, name := range cfg.Apps {
			if rate := e.Config.Apps[name].Rate; rate > 0 {
				if cfg.AppRates == nil {
					cfg.AppRates = map[string]float64{}
				}
				cfg.AppRates[name] = rate
			}
		}
	}
	cfg.Streams = e.Options()
	if e.Config != nil && e.Config.Notify.Submissions != nil {
		sc := e.Config.Notify.Submissions
		raw, err := sc.Secrets()
		if err != nil {
			return nil, fmt.Errorf("notify.submissions: %w", err)
		}
		if len(raw) == 0 {
			return nil, errors.New("notify.submissions: no secrets_env")
		}
		keys := make([][]byte, len(raw))
		for i, s := range raw {
			if keys[i], err = signature.ParseSecret(s); err != nil {
				return nil, fmt.Errorf("notify.submissions.secrets_env[%d] (%s): %w", i, sc.SecretsEnv[i], err)
			}
		}
		cfg.Webhooks = &frontdoor.Webhooks{AllowPrivate: sc.AllowPrivate, Secrets: keys}
	}
	if e.Metrics != nil {
		cfg.Metrics = e.Metrics.FrontDoor()
	}
	cfg.Learned = func(route, model, configKey string) (total, run *schedule.Dist) {
		return e.Stats.Lookup(route, model, configKey, 0) // the model's own, not a length's
	}
	return frontdoor.New(cfg, e.JS, e.NS, e.Res, e.Jobs)
}

// FrontDoorFlags are who may use the HTTP front door and where it may
// listen: the same flags, with the same rule (frontdoor.CheckExposure and
// the Host check), on every binary that serves it — cmd/ingest and pollux
// serve. The address flag is each binary's own (its default differs).
type FrontDoorFlags struct {
	TokensFile string `name:"http-tokens-file" env:"POLLUX_HTTP_TOKENS_FILE" type:"path" help:"File of the front door's tokens, one a line: TOKEN [act|read|admin] [name=WHO] [app=APP|app=*] [rate=REQUESTS_A_SECOND] (# comments); reread when it changes. Without it anyone who reaches the front door may act, so it listens on loopback only and answers only requests for localhost, a loopback address or --http-allowed-hosts."`
	Insecure   bool   `name:"http-insecure" env:"POLLUX_HTTP_INSECURE" help:"Serve the front door without tokens beyond loopback (behind a gateway that authenticates); refused otherwise."`
	// Inputs are the flags of the input files uploaded through the faces.
	Inputs       InputsFlags `embed:""`
	AllowedHosts []string    `name:"http-allowed-hosts" env:"POLLUX_HTTP_ALLOWED_HOSTS" sep:"," placeholder:"NAME,..." help:"Host names (or addresses, without a port) the front door answers besides localhost and the loopback addresses, comma-separated: the names a gateway or your clients reach it by. Without tokens any other Host is refused (421), which stops DNS rebinding; with tokens, when given, it is enforced too."`
}

// Check checks the flags and the address the front door is to listen on
// against the listen rule (frontdoor.CheckExposure), before anything
// starts.
func (f FrontDoorFlags) Check(addr string) error {
	if err := frontdoor.CheckAllowedHosts(f.AllowedHosts); err != nil {
		return err
	}
	return frontdoor.CheckExposure(addr, f.TokensFile != "", f.Insecure)
}

// Tokens loads the tokens file (nil without one).
func (f FrontDoorFlags) Tokens() (*frontdoor.Tokens, error) {
	if f.TokensFile == "" {
		return nil, nil
	}
	return frontdoor.LoadTokens(f.TokensFile)
}

// KeepOutputs are the routes that keep their outputs (keep_outputs), in
// order: output custody copies their outputs, and the faces link an app to
// the copies.
func (e *Env) KeepOutputs() []string {
	var out []string
	for _, name := range e.RouteNames() {
		if e.KeepsOutputs(name) {
			out = append(out, name)
		}
	}
	return out
}

// OutputProxies are how the front door fetches each route's outputs it
// serves through itself (output_proxy; frontdoor.OutputProxy).
func (e *Env) OutputProxies() map[string]frontdoor.OutputProxy {
	out := map[string]frontdoor.OutputProxy{}
	for _, name := range e.RouteNames() {
		if e.Config != nil {
			out[name] = frontdoor.NewOutputProxy(e.Config.Routes[name].OutputProxy)
		}
	}
	return out
}

// KeepsOutputs reports whether route keeps its outputs (keep_outputs).
func (e *Env) KeepsOutputs(route string) bool { return e.Config.Routes[route].KeepOutputs != nil }

// Faces are the provider faces the configuration mounts on its routes and
// model routes, in order.
func (e *Env) Faces() []face.Mount {
	var out []face.Mount
	for _, name := range e.RouteNames() {
		for _, k := range e.Config.Routes[name].Faces {
			out = append(out, face.Mount{Kind: face.Kind(k), Route: name})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(e.ModelRoutes)) {
		for _, k := range e.Config.ModelRoutes[name].Faces {
			out = append(out, face.Mount{Kind: face.Kind(k), Route: name})
		}
	}
	return out
}

// IntakeConn dials a second connection to the servers nc reaches, as nc
// does (its servers, credentials, TLS), but without a reconnect buffer:
// while it is down a publish is refused at once, never kept to go out
// when it is back. The front door publishes submissions on it
// (frontdoor.Config.Intake), so that a create it answered 503 is never
// sent afterwards. Its disconnects are nc's to log.
func IntakeConn(nc *nats.Conn) (*nats.Conn, error) {
	opts := nc.Opts
	opts.Name += "-intake"
	opts.ReconnectBufSize = -1
	opts.DisconnectedErrCB, opts.DisconnectedCB, opts.ReconnectedCB, opts.ClosedCB = nil, nil, nil, nil
	c, err := opts.Connect()
	if err != nil {
		return nil, fmt.Errorf("connect the front door's intake to NATS: %w", err)
	}
	return c, nil
}
