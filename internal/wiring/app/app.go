// Package app is what every Pollux binary does around its service: the
// flags they share (each with an environment twin), the logger, the NATS
// connection, the streams and buckets, the routes, the metrics endpoint,
// signal handling and an orderly shutdown.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/core/inputs"
	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/learn"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/core/spend"
	"github.com/pollux-dev/pollux/internal/edge/census"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/platform/httpserve"
	"github.com/pollux-dev/pollux/internal/wiring/metrics"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Flags are shared by the service binaries.
type Flags struct {
	NATSURL     string `name:"nats-url" env:"POLLUX_NATS_URL" help:"NATS server URL(s), comma-separated (default: the config's nats.url, else nats://127.0.0.1:4222)."`
	Config      string `name:"config" env:"POLLUX_CONFIG" default:"pollux.yaml" help:"Configuration file (YAML or JSON)."`
	MetricsAddr string `name:"metrics-addr" env:"POLLUX_METRICS_ADDR" default:"${metrics_addr}" help:"Address for /metrics, /healthz and /readyz; empty to disable (default ${metrics_addr})."`
	LogLevel    string `name:"log-level" env:"POLLUX_LOG_LEVEL" default:"info" enum:"debug,info,warn,error" help:"Log level (debug, info, warn, error)."`
	LogFormat   string `name:"log-format" env:"POLLUX_LOG_FORMAT" default:"json" enum:"json,console" help:"Log format: json for machines, console for humans."`
	// TimeScale compresses the schedule's model time, for tests and demos
	// against the simulated provider; 1 in production.
	TimeScale float64 `name:"time-scale" env:"POLLUX_TIME_SCALE" default:"1" hidden:"" help:"Compress the schedule's time (tests and demos only)."`
	// OTLPEndpoint turns tracing on (internal/platform/tracing); its environment
	// twin is the standard variable.
	OTLPEndpoint string `name:"otlp-endpoint" env:"OTEL_EXPORTER_OTLP_ENDPOINT" help:"OTLP/HTTP collector base URL (http://host:4318) to export the jobs' traces to; empty (the default): no tracing. The other OTEL_* variables apply."`
}

// NewLogger returns a zerolog logger writing to w.
func NewLogger(level, format string, w io.Writer) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		return zerolog.Nop(), fmt.Errorf("log level %q: %w", level, err)
	}
	if format == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// Env is a binary's connected environment.
type Env struct {
	Config *config.Config
	NC     *nats.Conn
	JS     jetstream.JetStream
	NS     events.Namespace
	Res    *events.Resources
	Routes map[string]*route.Route
	// ModelRoutes are the configuration's model routes over Routes.
	ModelRoutes map[string]*route.ModelRoute
	Jobs        *jobs.Owner
	Pauses      *route.Pauses
	// Gates are the process's one set of gates to the providers (one pool
	// of budget leases), handed to every service the process runs; Close
	// returns their idle leases.
	Gates *route.Gates
	Stats *learn.Stats
	// Spend prices jobs and holds the apps to their budgets (package
	// spend), for the front door and ingest to admit creates with and the
	// owner's Terminal hook to count their costs.
	Spend   *spend.Keeper
	Metrics *metrics.Metrics
	Log     zerolog.Logger
	// inputs is the inputs store UseInputs opened (nil before).
	inputs *inputs.Store
	// intake is the front door's connection for its intake (FrontDoor),
	// closed by Close.
	intake *nats.Conn
}

// Options returns the stream options of the configuration.
func (e *Env) Options() events.Options { return e.Config.Streams.Options() }

// RouteNames lists the environment's routes in order.
func (e *Env) RouteNames() []string {
	names := make([]string, 0, len(e.Routes))
	for n := range e.Routes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Levels are the budget levels of the process's routes that limit
// anything (shared leases or running slots), for the census.
func (e *Env) Levels() []census.Want {
	var out []census.Want
	seen := map[string]bool{}
	for _, name := range e.RouteNames() {
		for _, l := range e.Routes[name].Levels {
			limits := l.Running > 0 || !l.Submit.IsZero() || !l.Status.IsZero()
			if limits && !seen[l.Scope()] {
				seen[l.Scope()] = true
				out = append(out, census.Want{Scope: l.Scope(), Running: l.Running > 0})
			}
		}
	}
	return out
}

// RunCensus exports the fleet census (see package census) as gauges on the
// process's metrics, refreshed every interval, until ctx ends.
func (e *Env) RunCensus(ctx context.Context, every time.Duration) error {
	c := census.NewCollector(e.Census, every, e.Log)
	if err := e.Metrics.Registry().Register(c); err != nil {
		return fmt.Errorf("census metrics: %w", err)
	}
	return c.Run(ctx)
}

// Auth turns the configuration's NATS authentication and TLS into
// connection options, reading the secrets it names.
func Auth(c config.NATS) ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case c.CredsFile != "":
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	case c.NKeyFile != "":
		o, err := nats.NkeyOptionFromSeed(c.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("nats.nkey_file: %w", err)
		}
		opts = append(opts, o)
	case c.User != "":
		pw, err := c.Password()
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.UserInfo(c.User, pw))
	case c.TokenEnv != "" || c.TokenFile != "":
		tok, err := c.Token()
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Token(tok))
	}
	if c.TLS.CAFile != "" {
		opts = append(opts, nats.RootCAs(c.TLS.CAFile))
	}
	if c.TLS.CertFile != "" {
		opts = append(opts, nats.ClientCert(c.TLS.CertFile, c.TLS.KeyFile))
	}
	if c.TLS.Enabled() {
		opts = append(opts, nats.Secure())
	}
	return opts, nil
}

// Connect dials NATS with reconnection forever and logs connection changes.
func Connect(url, name string, auth []nats.Option, log zerolog.Logger) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: a deliberate close
				log.Warn().Err(err).Msg("disconnected from NATS")
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info().Str(logkey.Server, nc.ConnectedUrlRedacted()).Msg("reconnected to NATS")
		}),
	}
	opts = append(opts, auth...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", redact(url), err)
	}
	return nc, nil
}

// redact hides credentials in a NATS URL.
func redact(url string) string {
	if at := strings.LastIndex(url, "@"); at >= 0 {
		if scheme := strings.Index(url, "://"); scheme >= 0 && scheme < at {
			return url[:scheme+3] + "***" + url[at:]
		}
	}
	return url
}

// openTimeout bounds Open: creating or checking every stream and bucket
// (eleven, each replicated on a cluster) and loading the route pauses and
// learned durations. A forming or busy three-node cluster has taken over
// 30 s for it (TestChaosClusterFailover under make test's load); a
// process that is still not ready after it exits with the reason.
const openTimeout = time.Minute

// Open builds the environment over an existing connection: it creates or
// checks the streams and buckets and starts the mirrors of route pauses and
// learned durations (owned by g).
func Open(ctx context.Context, g *errgroup.Group, cfg *config.Config, nc *nats.Conn, routes map[string]*route.Route, m *metrics.Metrics, log zerolog.Logger, opts ...Option) (*Env, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	ns, err := events.NewNamespace(cfg.Prefix)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	res, err := ns.Setup(sctx, js, cfg.Streams.Options())
	if err != nil {
		return nil, err
	}
	pauses := route.NewPauses(res.Routes, log)
	stats := learn.New(res.Stats, log)
	stats.OnDrift = driftTold(js, ns, log)
	for what, run := range map[string]func(context.Context, chan<- struct{}) error{
		"route pauses": pauses.Run, "learned durations": stats.Run,
	} {
		ready := make(chan struct{})
		g.Go(func() error { return run(ctx, ready) })
		select {
		case <-ready:
		case <-sctx.Done():
			return nil, fmt.Errorf("loading %s: timed out", what)
		}
	}
	pauses.Started = m.Paused
	for name := range routes {
		m.Routes(name) // every route's series at zero from the start
		m.Drift(name, func() float64 { return stats.Drift(name) })
		m.Webhooks(name, func() (float64, time.Duration) { return stats.Webhook(name) })
	}
	apps := budget.NewApps(js, ns, cfg.Streams.Options(), appCaps(cfg))
	keeper, err := newKeeper(cfg, routes, m, res.Spend, apps)
	if err != nil {
		return nil, err
	}
	var owner *jobs.Owner
	owner = jobs.New(ns, js, res, jobs.Config{Options: cfg.Streams.Options(), Logger: log, Hooks: jobs.Hooks{
		Published: m.Published,
		Terminal: func(j *state.Job) {
			m.Terminal(j)
			stats.Observe(j)
			settleSpend(ctx, keeper, j, log)
			endWaiting(ctx, apps, j, log)
			hedgeEnded(ctx, owner, j, log)
		},
		LatePolls: m.LatePolls,
	}, Slots: budget.NewReleaser(js, ns), Tracer: openOptions(opts).tracer})
	models, err := route.BuildModels(cfg, routes)
	if err != nil {
		return nil, err
	}
	observe := m.Gate()
	if calls := openOptions(opts).calls; calls != nil {
		metric := observe
		observe = func(r string, op route.Op, class string, d time.Duration) {
			metric(r, op, class, d)
			calls(r, op, class, d)
		}
	}
	gates := route.NewGates(js, ns, res.Slots, cfg.Streams.Options(), pauses, route.GateConfig{
		Observe: observe, Tracer: openOptions(opts).tracer, Logger: log, Apps: apps,
	})
	return &Env{
		Config: cfg, NC: nc, JS: js, NS: ns, Res: res, Routes: routes, ModelRoutes: models, Pauses: pauses, Stats: stats,
		Metrics: m, Log: log, Jobs: owner, Gates: gates, Spend: keeper,
	}, nil
}

// Close returns what the environment's services held of the fleet's:
// the gates' idle budget leases; and closes the front door's intake
// connection. Call it once its services have stopped.
func (e *Env) Close() {
	e.Gates.Close()
	if e.intake != nil {
		e.intake.Close()
	}
}

// Run is a service binary's main: it loads the configuration, connects,
// serves metrics, runs the service until SIGINT or SIGTERM, then drains the
// connection. It returns the process exit code.
func Run(f Flags, component string, stderr io.Writer, run func(context.Context, *Env) error) int {
	log, err := NewLogger(f.LogLevel, f.LogFormat, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	log = log.With().Str(logkey.Component, component).Logger()
	if err := serve(f, component, log, run); err != nil {
		log.Error().Err(err).Msg("stopped with an error")
		return 1
	}
	log.Info().Msg("stopped")
	return 0
}

func serve(f Flags, component string, log zerolog.Logger, run func(context.Context, *Env) error) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg, err := config.Load(f.Config)
	if err != nil {
		return err
	}
	url := f.NATSURL
	if url == "" {
		url = cfg.NATS.URL
	}
	if url == "" {
		url = nats.DefaultURL
	}
	if f.TimeScale <= 0 {
		return fmt.Errorf("time-scale: %v must be positive", f.TimeScale)
	}
	routes, err := route.Build(cfg, route.Registry, nil, f.TimeScale, log)
	if err != nil {
		return err
	}
	auth, err := Auth(cfg.NATS)
	if err != nil {
		return err
	}
	tracer, stopTracing, err := startTracing(ctx, f.OTLPEndpoint, component, log)
	if err != nil {
		return err
	}
	defer stopTracing() // deferred first, run last: after the drain's spans
	nc, err := Connect(url, "pollux-"+component, auth, log)
	if err != nil {
		return err
	}
	defer drain(nc, log)

	m := metrics.New()
	g, gctx := errgroup.WithContext(ctx)
	env, err := Open(gctx, g, cfg, nc, routes, m, log, WithTracer(tracer))
	if err != nil {
		stop()
		_ = g.Wait()
		return err
	}
	if f.MetricsAddr != "" {
		ln, err := net.Listen("tcp", f.MetricsAddr)
		if err != nil {
			stop()
			_ = g.Wait()
			return fmt.Errorf("metrics listener: %w", err)
		}
		g.Go(func() error { return ServeHTTP(gctx, "metrics", ln, Observability(m, nc)) })
		log.Info().Str(logkey.Addr, ln.Addr().String()).Msg("serving metrics")
	}
	g.Go(func() error { return run(gctx, env) })
	err = g.Wait()
	env.Close() // the services have stopped: their idle leases go back
	return err
}

// drain flushes and closes the connection, bounded in time.
func drain(nc *nats.Conn, log zerolog.Logger) {
	done := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(done) })
	if err := nc.Drain(); err != nil {
		nc.Close()
		return
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		log.Warn().Msg("NATS drain timed out")
		nc.Close()
	}
}

// Observability serves /metrics, /healthz (the process runs) and /readyz
// (it is connected to NATS).
func Observability(m *metrics.Metrics, nc *nats.Conn) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !nc.IsConnected() {
			http.Error(w, "not connected to NATS", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

// ServeHTTP serves h on ln until ctx ends, then shuts down gracefully; an
// error names the server as what. When ctx ends, the requests' contexts
// end too: a handler that waits (the simulated provider's latency and
// hangs) returns at once instead of holding the shutdown past its grace;
// connections still open after the grace are closed.
func ServeHTTP(ctx context.Context, what string, ln net.Listener, h http.Handler) error {
	closing, endRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer endRequests()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute,
		BaseContext: func(net.Listener) context.Context { return closing }}
	err := httpserve.Run(ctx, ln, srv, 5*time.Second, endRequests)
	if errors.Is(err, context.DeadlineExceeded) {
		// Connections still open after the grace, every handler having
		// returned: one a client opened and sent nothing on, which
		// net/http waits 5 s for before it counts it idle. Nothing on
		// them is worth waiting for.
		_ = srv.Close()
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s server: %w", what, err)
	}
	return nil
}

// hedgeEnded brings forward the next poll of the other job of a hedge
// that just settled: the job a hedge beat (it adopts the hedge's result),
// or the hedge of a job that ended (it is canceled). The polls would find
// out anyway (see package poller); this makes it now rather than at their
// next due time. In the background, bounded by ctx and 10 s.
func hedgeEnded(ctx context.Context, owner *jobs.Owner, j *state.Job, log zerolog.Logger) {
	r := j.Routing
	if r == nil {
		return
	}
	other := r.HedgedBy
	if r.HedgeOf != "" {
		if j.State != state.Succeeded {
			return // a hedge that did not succeed changes nothing
		}
		other = r.HedgeOf
	}
	if other == "" {
		return
	}
	go func() {
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		o, err := owner.Get(hctx, other)
		if err != nil || o.State.Terminal() || o.RemoteID == "" {
			return
		}
		if err := owner.Webhooks().Hint(hctx, o.Route, o.ID, o.RemoteID); err != nil && ctx.Err() == nil {
			log.Debug().Err(err).Str(logkey.JobID, o.ID).Msg("bringing a hedge's other job forward failed; its next poll settles it")
		}
	}()
}

// NotifyRoutes are the endpoints each route's job events go to (the
// routes' notify lists).
func NotifyRoutes(c *config.Config) map[string][]string {
	out := map[string][]string{}
	for name, r := range c.Routes {
		if len(r.Notify) > 0 {
			out[name] = slices.Clone(r.Notify)
		}
	}
	return out
}

// NotifyEndpoints are the endpoints' names, "submission" included when
// submissions may name their own.
func NotifyEndpoints(c *config.Config) []string {
	names := slices.Sorted(maps.Keys(c.Notify.Endpoints))
	if c.Notify.Submissions != nil {
		names = append(names, config.NotifySubmissions)
	}
	return names
}
