package frontdoor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/inputs"
	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/core/spend"
	"github.com/pollux-dev/pollux/internal/edge/census"
	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/index"
	"github.com/pollux-dev/pollux/internal/platform/httpserve"
	"github.com/pollux-dev/pollux/internal/platform/problem"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/schedule"
)

// Config configures the front door. Zero values mean the defaults on each
// field.
type Config struct {
	// Routes are the routes submissions may name (required).
	Routes []string
	// ModelRoutes are the model routes submissions may name too (not
	// track requests: a tracked job's route is known).
	ModelRoutes []string
	// RequestTimeout bounds the NATS calls of one request (default 10s).
	RequestTimeout time.Duration
	// MaxStreams caps the event streams open at once; one more is answered
	// 429 (default 1024).
	MaxStreams int
	// MaxStreamDuration ends an event stream that has run this long; the
	// client resumes with Last-Event-ID (default 30m).
	MaxStreamDuration time.Duration
	// MaxResume is the most jobs a live stream (GET /v1/stream) resumed
	// with Last-Event-ID sends as changed since; when more changed, it
	// sends one reset event instead (default 5000).
	MaxResume int
	// KeepAlive is how often an idle event stream sends a comment line, so
	// proxies keep it open (default 15s).
	KeepAlive time.Duration
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout bound
	// each connection (defaults 5s, 15s, 15s, 60s). WriteTimeout applies to
	// each event of a stream, not to the stream as a whole.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes caps request headers (default 16 KiB).
	MaxHeaderBytes int
	// Tokens, when set, are the bearer tokens a request must carry
	// (Authorization: Bearer <token>, or the console's session cookie);
	// without one it is answered 401, and a read-only one may not change
	// anything (403). Nil: no authentication — Listen refuses an address
	// beyond loopback unless told otherwise, and only requests for
	// localhost, a loopback address or AllowedHosts are answered.
	Tokens *Tokens
	// Apps are the apps the tokens may name (app=; the configuration's
	// apps): a tokens file naming another is refused, at New and at a
	// reload. None: any app.
	Apps []string
	// AppRates are the apps' request rates across the fleet, by app
	// (apps.<name>.rate): past it a request of the app's tokens is
	// answered 429 (quota.go; default none).
	AppRates map[string]float64
	// Streams are the options of the streams and consumers the front door
	// sets up: the request quotas' leases (default: events.Options{}).
	Streams events.Options
	// Spend admits each create against its app's budget before it is
	// published: one over it is answered 429 budget_exceeded, in the
	// face's shape through a face (nil: nothing is priced).
	Spend *spend.Keeper
	// AllowedHosts are the host names (or addresses, without a port) a
	// request's Host may name besides localhost and the loopback
	// addresses. Without Tokens any other Host is answered 421, which
	// stops DNS rebinding; with Tokens any Host is answered unless this is
	// set (default: none).
	AllowedHosts []string
	// Index lists jobs (GET /v1/jobs, /v1/stream, the counts and activity
	// of /v1/routes, the models of /v1/models); nil: those answer 503.
	Index *index.Index
	// Pauses pauses and resumes routes (POST /v1/routes/{name}/pause and
	// resume); nil: those answer 503.
	Pauses *route.Pauses
	// WebhookRoutes are the routes that ask their provider for webhooks
	// (a webhook_url); the others are poll-only, as GET /v1/routes says
	// (default: none).
	WebhookRoutes []string
	// Census samples the routes for GET /v1/routes; nil: it answers 503.
	Census func(ctx context.Context) (*census.Snapshot, error)
	// Learned returns the learned durations of a route and model (as
	// learn.Stats.Lookup), and Policies the routes' schedules, for the
	// models endpoints; either nil: those answer 503.
	Learned  func(route, model, configKey string) (total, run *schedule.Dist)
	Policies map[string]schedule.Policy
	// MaxBulk is the most jobs one bulk cancel or resubmit acts on; one
	// matching more is refused (default DefaultMaxBulk).
	MaxBulk int
	// LastKnown is how many jobs' last records read the faces remember,
	// to answer their apps' polls through a NATS outage (known.go; each
	// at most 8 KiB; default DefaultLastKnown; negative: none).
	LastKnown int
	// Intake is the JetStream that submissions and track requests are
	// published with: one on a connection without a reconnect buffer
	// (nats.ReconnectBufSize(-1)), so that no submission waits in the
	// client to go out after its request was answered (intake.go). Nil:
	// the JetStream New is given, whose connection's status is looked at
	// before each publish (a submission may then, rarely, be caught in
	// its reconnect buffer: see intake.go).
	Intake jetstream.JetStream
	// ConnectWait is how long a submission waits for the connection to
	// NATS, when it is down, before it is answered 503 with nothing sent
	// (default 5s).
	ConnectWait time.Duration
	// DoubtWait bounds how long a submission whose publish went
	// unanswered — sent, no ack: a timeout, a disconnect mid-flight — is
	// held, and sent again with the same Nats-Msg-Id whenever NATS
	// answers, before it is answered 503 and settled (intake.go; default
	// 30s; at most half the intake stream's duplicate window).
	DoubtWait time.Duration
	// Faces are the provider faces to serve (package face): each below
	// face.Prefix(kind, route), its route a route or model route of this
	// front door (default none).
	Faces []face.Mount
	// FaceBuilders build the faces (default Builders).
	FaceBuilders map[face.Kind]face.New
	// KeepOutputs are the routes that keep their succeeded jobs' outputs
	// (keep_outputs): a face gives an app its own URL for their outputs,
	// which serves the copy output custody keeps (default none).
	KeepOutputs []string
	// OutputProxies are how the outputs a face serves through the front
	// door (face.Proxied) are fetched, by route (proxy.go; default for a
	// route not named: NewOutputProxy of the defaults, private addresses
	// refused).
	OutputProxies map[string]OutputProxy
	// Inputs keeps the input files the faces take uploads of (package
	// inputs); a submission naming one is checked against it, and its
	// signed URLs are served (inputs.go). Nil: none are kept, and a
	// submission naming one is refused.
	Inputs *inputs.Store
	// Webhooks, when set, lets a face's create name a webhook URL of the
	// caller's own (notify.submissions), and tells the caller its signing
	// secret (face.Webhooks). Nil: a create naming one is refused.
	Webhooks *Webhooks
	// Console, when set, is served at /console/ and / redirects there.
	Console http.Handler
	// Logger receives the front door's log lines (default: none).
	Logger zerolog.Logger
	// Metrics observes its requests (metrics.go).
	Metrics Metrics
	// Now is the clock a submission's deadline is checked against
	// (default time.Now).
	Now func() time.Time
}

// Server is the HTTP front door.
type Server struct {
	cfg    Config
	js     jetstream.JetStream
	ns     events.Namespace
	jobs   *jobs.Owner
	stream jetstream.Stream
	slots  chan struct{}
	log    zerolog.Logger
	// openCSRF is the CSRF token of browsers without tokens.
	openCSRF string
	// allowed are Config.AllowedHosts, lower-cased.
	allowed map[string]bool
	// census is the latest census of the routes.
	census censusCache
	// quotas are the tokens' and apps' request quotas; quotaLogged is
	// when one that could not be asked was last logged (Unix ns).
	quotas      *budget.Quotas
	quotaLogged atomic.Int64
	// faces are the provider faces served, and waiters the requests of
	// theirs waiting for a job to change.
	faces   []mountedFace
	waiters waiters
	// known are the last records the faces read (known.go).
	known *known
	// proxy is the output proxy of a route OutputProxies does not name,
	// made once.
	proxyOnce sync.Once
	proxy     OutputProxy
	// intake publishes submissions and track requests, and settles
	// those answered 503 in doubt (intake.go).
	intake *intake
	// falJWKS is the JWKS FalJWKSPath answers (nil: none; faljwks.go).
	falJWKS []byte
}

// New validates the configuration and prepares the front door. It publishes
// with js under ns, reads job records through their owner and events from
// res.Events.
func New(cfg Config, js jetstream.JetStream, ns events.Namespace, res *events.Resources, owner *jobs.Owner) (*Server, error) {
	if len(cfg.Routes) == 0 {
		return nil, errors.New("frontdoor: Routes: at least one route is required")
	}
	for _, r := range cfg.Routes {
		if !events.ValidToken(r) {
			return nil, fmt.Errorf("frontdoor: Routes: %q is not a valid route name", r)
		}
	}
	cfg.Routes = slices.Clone(cfg.Routes)
	cfg.RequestTimeout = cmp.Or(cfg.RequestTimeout, 10*time.Second)
	cfg.MaxStreams = cmp.Or(cfg.MaxStreams, 1024)
	cfg.MaxStreamDuration = cmp.Or(cfg.MaxStreamDuration, 30*time.Minute)
	cfg.KeepAlive = cmp.Or(cfg.KeepAlive, 15*time.Second)
	cfg.MaxResume = cmp.Or(cfg.MaxResume, 5000)
	cfg.ReadHeaderTimeout = cmp.Or(cfg.ReadHeaderTimeout, 5*time.Second)
	cfg.ReadTimeout = cmp.Or(cfg.ReadTimeout, 15*time.Second)
	cfg.WriteTimeout = cmp.Or(cfg.WriteTimeout, 15*time.Second)
	cfg.IdleTimeout = cmp.Or(cfg.IdleTimeout, 60*time.Second)
	cfg.MaxHeaderBytes = cmp.Or(cfg.MaxHeaderBytes, 16<<10)
	cfg.LastKnown = cmp.Or(cfg.LastKnown, DefaultLastKnown)
	cfg.ConnectWait = cmp.Or(cfg.ConnectWait, 5*time.Second)
	cfg.DoubtWait = cmp.Or(cfg.DoubtWait, 30*time.Second)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxStreams < 0 || cfg.RequestTimeout < 0 || cfg.MaxStreamDuration < 0 || cfg.KeepAlive < 0 || cfg.MaxResume < 0 ||
		cfg.ConnectWait < 0 || cfg.DoubtWait < 0 {
		return nil, errors.New("frontdoor: MaxStreams, RequestTimeout, MaxStreamDuration, KeepAlive, MaxResume, ConnectWait and DoubtWait must not be negative")
	}
	in, err := newIntake(cfg, js, res)
	if err != nil {
		return nil, err
	}
	allowed, err := allowedHosts(cfg.AllowedHosts)
	if err != nil {
		return nil, err
	}
	if cfg.Tokens != nil {
		cfg.Tokens.mu.Lock()
		cfg.Tokens.log, cfg.Tokens.apps = cfg.Logger, slices.Clone(cfg.Apps)
		err := knownApps(cfg.Tokens.entries, cfg.Apps)
		cfg.Tokens.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("frontdoor: Tokens: %w", err)
		}
	}
	s := &Server{
		cfg: cfg, js: js, ns: ns, jobs: owner, stream: res.Events,
		slots: make(chan struct{}, cfg.MaxStreams), log: cfg.Logger, openCSRF: openCSRF(), allowed: allowed,
		known: newKnown(cfg.LastKnown), intake: in, falJWKS: falJWKS(cfg.Webhooks),
		quotas: budget.NewQuotas(js, ns, res.Slots, cfg.Streams),
	}
	if err := s.buildFaces(); err != nil {
		return nil, err
	}
	return s, nil
}

// Handler returns the front door's HTTP handler. Event streams it serves end
// when their request's context ends.
func (s *Server) Handler() http.Handler {
	return s.handler(context.Background())
}

// handler returns the HTTP handler; event streams also end when closing
// ends, so a shutdown does not wait for them.
func (s *Server) handler(closing context.Context) http.Handler {
	s.startWaiters(closing)
	mux := http.NewServeMux()
	s.mountFaces(mux)
	for _, e := range s.endpoints(closing) {
		mux.Handle(e.pattern, e.h)
	}
	return withWriter(s.measure(mux, s.access))
}

// endpoint is one pattern the front door serves (the faces' aside).
type endpoint struct {
	pattern string
	h       http.Handler
}

// endpoints are the front door's own endpoints; event streams end when
// closing ends. Every one is a row of the isolation matrix
// (isolation_test.go), which fails for a pattern it has no row for.
func (s *Server) endpoints(closing context.Context) []endpoint {
	out := []endpoint{
		{"/v1/jobs", methods{http.MethodGet: s.list, http.MethodPost: s.submit}},
		// A job may be named "track": GET reads it.
		{"/v1/jobs/track", methods{http.MethodPost: s.track, http.MethodGet: func(w http.ResponseWriter, r *http.Request) *apiError {
			r.SetPathValue("id", "track")
			return s.get(w, r)
		}}},
		{"/v1/jobs/{id}", only(http.MethodGet, s.get)},
		{"/v1/jobs/{id}/cancel", only(http.MethodPost, s.cancel)},
		{"/v1/jobs/{id}/resubmit", only(http.MethodPost, s.resubmitOne)},
	}
	for _, name := range []string{"cancel", "resubmit"} {
		h := map[string]func(http.ResponseWriter, *http.Request) *apiError{"cancel": s.bulkCancel, "resubmit": s.bulkResubmit}[name]
		// Bulk actions; a job may be named so too: GET reads it.
		out = append(out, endpoint{"/v1/jobs/" + name, methods{http.MethodPost: h, http.MethodGet: func(w http.ResponseWriter, r *http.Request) *apiError {
			r.SetPathValue("id", name)
			return s.get(w, r)
		}}})
	}
	out = append(out,
		endpoint{"/v1/jobs/{id}/outputs/{n}", only(http.MethodGet, s.output)},
		endpoint{"/v1/jobs/{id}/deliveries", only(http.MethodGet, s.deliveries)},
		endpoint{"/v1/jobs/{id}/events", only(http.MethodGet, func(w http.ResponseWriter, r *http.Request) *apiError {
			return s.events(closing, w, r)
		})},
		endpoint{"/v1/stream", only(http.MethodGet, func(w http.ResponseWriter, r *http.Request) *apiError {
			return s.live(closing, w, r)
		})},
		endpoint{"/v1/inputs/{id}", methods{http.MethodGet: s.fetchInput, http.MethodHead: s.fetchInput}},
		endpoint{"/v1/inputs/{id}/upload", methods{http.MethodPut: s.uploadInput, http.MethodPost: s.uploadInputForm}},
		endpoint{FalJWKSPath, only(http.MethodGet, s.serveFalJWKS)},
		endpoint{"/v1/routes", only(http.MethodGet, s.routes)},
		endpoint{"/v1/routes/{name}/pause", only(http.MethodPost, s.pause)},
		endpoint{"/v1/routes/{name}/resume", only(http.MethodPost, s.resume)},
		endpoint{"/v1/models", only(http.MethodGet, s.models)},
		endpoint{"/v1/spend", only(http.MethodGet, s.spendReport)},
		endpoint{"/v1/routes/{name}/models/{model...}", only(http.MethodGet, s.model)},
		endpoint{"/console/login", only(http.MethodPost, s.login)},
		endpoint{"/console/logout", only(http.MethodPost, s.logout)},
		endpoint{"/console/session", only(http.MethodGet, s.session)},
	)
	if s.cfg.Console != nil {
		out = append(out,
			endpoint{"/console/", s.cfg.Console},
			endpoint{"/console", http.RedirectHandler("/console/", http.StatusMovedPermanently)},
			endpoint{"/{$}", http.RedirectHandler("/console/", http.StatusFound)},
		)
	}
	return append(out, endpoint{"/", problem.NotFound("see api/openapi.yaml")})
}

// only adapts a handler that returns its error response, and answers 405
// to any method but method.
func only(method string, h func(http.ResponseWriter, *http.Request) *apiError) http.Handler {
	return methods{method: h}
}

// methods is an endpoint's handlers by method; it answers 405 to any
// other method.
type methods map[string]func(http.ResponseWriter, *http.Request) *apiError

func (m methods) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, ok := m[r.Method]
	if !ok {
		problem.MethodNotAllowed(w, r, strings.Join(slices.Sorted(maps.Keys(m)), ", "))
		return
	}
	if e := h(w, r); e != nil {
		e.write(w)
	}
}

// Run serves the front door on ln until ctx ends, then ends the event
// streams and shuts the server down, waiting at most 10s for requests in
// flight.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	closing, endStreams := context.WithCancel(context.WithoutCancel(ctx))
	defer endStreams()
	srv := &http.Server{
		Handler:           s.handler(closing),
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
	}
	s.log.Info().Str(logkey.Addr, ln.Addr().String()).Strs(logkey.Routes, s.cfg.Routes).Int(logkey.Tokens, s.cfg.Tokens.Len()).Strs(logkey.AllowedHosts, s.cfg.AllowedHosts).Msg("front door running")
	if s.cfg.Tokens == nil && !listensOnLoopback(ln.Addr()) {
		s.log.Warn().Str(logkey.Addr, ln.Addr().String()).
			Msg("the front door has no tokens and listens beyond loopback (--http-insecure): anyone who reaches it may act")
	}
	err := httpserve.Run(ctx, ln, srv, 10*time.Second, endStreams)
	s.waitSettles()
	if err != nil {
		return fmt.Errorf("front door: %w", err)
	}
	return nil
}

// knownRoute reports whether name is a configured route.
func (s *Server) knownRoute(name string) bool {
	return slices.Contains(s.cfg.Routes, name)
}

// unavailable logs a NATS failure and returns the 503 that reports it.
func (s *Server) unavailable(err error, what string) *apiError {
	s.log.Warn().Err(err).Msg(what + " failed")
	return fail(http.StatusServiceUnavailable, CodeUnavailable, "", what+" failed; retry later")
}
