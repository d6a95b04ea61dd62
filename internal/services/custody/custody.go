package custody

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/core/consume"
	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/platform/safehttp"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Metrics observe the service; nil fields are ignored. They must not block.
type Metrics struct {
	// Output counts an output's custody outcome by route: saved, gone,
	// too_large, failed (given up), retried (a failed download, tried
	// again later).
	Output func(route, outcome string)
	// Bytes counts the bytes of outputs saved, by route.
	Bytes func(route string, n int64)
	// Expiring counts the outputs_expiring events by route; kept says the
	// route keeps its outputs (so a copy failed or an output was too
	// large), false that nobody was asked to.
	Expiring func(route string, kept bool)
}

// Outcomes of an output (Metrics.Output).
var Outcomes = []string{state.OutputSaved, state.OutputGone, state.OutputTooLarge, state.OutputFailed, "retried"}

// Config configures the service. Zero values mean the defaults on each field.
type Config struct {
	// Routes are the routes that keep their outputs, with their settings
	// (defaults filled by New). Every other route's jobs are watched for
	// expiry only.
	Routes map[string]config.KeepOutputs
	// Openers download the outputs of the routes whose adapter needs its
	// credentials for it (provider.OutputOpener), by route; the others are
	// fetched with a plain GET.
	Openers map[string]provider.OutputOpener
	// ExpiringLead is how long before outputs expire an unsaved job's
	// outputs_expiring is emitted (default config.DefaultExpiringLead).
	ExpiringLead time.Duration
	// TTL is how long a kept output stays in the outputs bucket (default
	// config.DefaultOutputsTTL).
	TTL time.Duration
	// Options size the streams (see events.Options).
	Options events.Options
	// Workers is how many jobs a process copies at once (default 4).
	Workers int
	// RetryBase is the wait after a job's first failed copy, doubling to
	// 30 min (default 10s).
	RetryBase time.Duration
	// Drain bounds the copies under way at shutdown before they are
	// abandoned (default 15s); an abandoned copy is taken up again by the
	// next process.
	Drain time.Duration
	// Logger receives the service's log lines (default: none).
	Logger zerolog.Logger
	// Metrics observe the service.
	Metrics Metrics
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Seed seeds the jitter (default: random).
	Seed uint64
}

// Service copies succeeded jobs' outputs and watches their expiry.
type Service struct {
	cfg     Config
	js      jetstream.JetStream
	ns      events.Namespace
	owner   jobs.Custody
	log     zerolog.Logger
	clients map[string]*http.Client // by route
	work    jetstream.Stream
	objects jetstream.ObjectStore
	rnd     *rand.Rand
}

// New prepares the service.
func New(cfg Config, js jetstream.JetStream, ns events.Namespace, owner jobs.Custody) (*Service, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.ExpiringLead = cmp.Or(cfg.ExpiringLead, config.DefaultExpiringLead)
	cfg.TTL = cmp.Or(cfg.TTL, config.DefaultOutputsTTL)
	cfg.Workers = cmp.Or(cfg.Workers, 4)
	cfg.RetryBase = cmp.Or(cfg.RetryBase, 10*time.Second)
	if cfg.ExpiringLead < 0 || cfg.TTL < 0 || cfg.Workers < 0 || cfg.RetryBase < 0 || cfg.Drain < 0 {
		return nil, errors.New("custody: ExpiringLead, TTL, Workers, RetryBase and Drain must not be negative")
	}
	if owner == (jobs.Custody{}) {
		return nil, errors.New("custody: the jobs' owner is required")
	}
	s := &Service{cfg: cfg, js: js, ns: ns, owner: owner, log: cfg.Logger.With().Str(logkey.Component, "custody").Logger(),
		rnd: schedule.NewRand(cfg.Seed), clients: map[string]*http.Client{}}
	routes := make(map[string]config.KeepOutputs, len(cfg.Routes))
	for name, k := range cfg.Routes {
		if k.MaxBytes < 0 || k.Timeout < 0 || k.Horizon < 0 {
			return nil, fmt.Errorf("custody: routes.%s.keep_outputs: max_bytes, timeout and horizon must not be negative", name)
		}
		k = k.WithDefaults()
		routes[name] = k
		c := safehttp.Client(k.Timeout, k.AllowPrivate)
		// A download may be redirected (to a CDN, a signed storage URL):
		// each hop's address is checked by the dialer all the same.
		c.CheckRedirect = func(_ *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("more than %d redirects", maxRedirects)
			}
			return nil
		}
		s.clients[name] = c
	}
	s.cfg.Routes = routes
	return s, nil
}

// maxRedirects bounds the redirects a download follows.
const maxRedirects = 5

// startupTimeout bounds the JetStream calls made before the service runs.
const startupTimeout = 30 * time.Second

// Durable consumer names (with the namespace's prefix before them).
const (
	copyConsumer = "-custody-copy"
	workConsumer = "-custody"
)

// Run copies and watches until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	var err error
	if s.work, err = events.UntilFormed(sctx, func(ctx context.Context) (jetstream.Stream, error) {
		return events.EnsureStream(ctx, s.js, s.ns.CustodyStreamConfig(s.cfg.Options))
	}); err != nil {
		return fmt.Errorf("custody: %w", err)
	}
	if s.objects, err = events.UntilFormed(sctx, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return events.EnsureObjectStore(ctx, s.js, s.ns.OutputsBucketConfig(s.cfg.Options, s.cfg.TTL))
	}); err != nil {
		return fmt.Errorf("custody: %w", err)
	}
	eventsStream, err := s.js.Stream(sctx, s.ns.EventsStream())
	if err != nil {
		return fmt.Errorf("custody: %w", err)
	}
	copyCfg := jetstream.ConsumerConfig{
		Durable:     s.ns.Prefix() + copyConsumer,
		Description: "Pollux output custody: copies succeeded jobs to the custody work queue",
		// Job events only: a route event's subject is one token shorter.
		FilterSubject: s.ns.Event("*", "*"),
		DeliverPolicy: jetstream.DeliverNewPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxDeliver:    -1,
		MaxAckPending: 256,
		Replicas:      s.cfg.Options.Replicas,
	}
	workCfg := jetstream.ConsumerConfig{
		Durable:       s.ns.Prefix() + workConsumer,
		Description:   "Pollux output custody: copies jobs' outputs, watches their expiry",
		FilterSubject: s.ns.Custody("*", "*"),
		AckPolicy:     jetstream.AckExplicitPolicy,
		// A copy under way tells the server so every heartbeat.
		AckWait:    2 * heartbeat,
		MaxDeliver: -1,
		// Jobs watched until their outputs expire wait here, each one
		// pending: a day of a busy route's jobs.
		MaxAckPending: maxWatched,
		Replicas:      s.cfg.Options.Replicas,
	}
	ensureCopy := func(ctx context.Context) (jetstream.Consumer, error) {
		return events.EnsureConsumer(ctx, eventsStream, copyCfg)
	}
	ensureWork := func(ctx context.Context) (jetstream.Consumer, error) {
		return events.EnsureConsumer(ctx, s.work, workCfg)
	}
	copier, err := ensureCopy(sctx)
	if err != nil {
		return fmt.Errorf("custody: %w", err)
	}
	worker, err := ensureWork(sctx)
	if err != nil {
		return fmt.Errorf("custody: %w", err)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return consume.Recreate(ctx, copier, ensureCopy, consume.Options{Workers: 4, Logger: s.log}, s.copy)
	})
	g.Go(func() error {
		return consume.Recreate(ctx, worker, ensureWork, consume.Options{Workers: s.cfg.Workers, Stream: s.work, Drain: s.cfg.Drain, Logger: s.log}, s.handle)
	})
	s.log.Info().Int(logkey.RoutesKept, len(s.cfg.Routes)).Msg("output custody running")
	return g.Wait()
}

// maxWatched bounds the jobs waiting in the work queue at once.
const maxWatched = 1 << 17

// copy copies one succeeded job that concerns custody to the work queue:
// its route keeps outputs, or its outputs expire.
func (s *Service) copy(ctx context.Context, msg jetstream.Msg) events.Outcome {
	ev, err := events.DecodeEvent(msg.Data())
	if err != nil || ev.Type != events.EventSucceeded || ev.Job == nil || len(ev.Job.Outputs) == 0 {
		return events.Done()
	}
	if _, keep := s.cfg.Routes[ev.Route]; !keep && ev.Job.OutputsExpireAt.IsZero() {
		return events.Done()
	}
	out := &nats.Msg{Subject: s.ns.Custody(ev.Route, ev.JobID), Data: msg.Data()}
	if _, err := s.js.PublishMsg(ctx, out, jetstream.WithMsgID("custody:"+ev.JobID)); err != nil {
		s.log.Warn().Err(err).Str(logkey.JobID, ev.JobID).Msg("copying a job to the custody queue failed; retrying")
		return events.Later(s.jitter(time.Second))
	}
	return events.Done()
}

func (s *Service) jitter(d time.Duration) time.Duration {
	return schedule.Jitter(d, schedule.RetryJitter, s.rnd)
}
