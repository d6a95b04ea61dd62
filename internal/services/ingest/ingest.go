package ingest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/core/consume"
	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/core/spend"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/schedule"
)

// startupTimeout bounds the JetStream calls made before the service runs.
const startupTimeout = 30 * time.Second

// Metrics observe the service; nil fields are ignored. They must not block.
type Metrics struct {
	// Submission counts intake messages by route, kind and outcome
	// (submitted, tracked, canceled, duplicate, rejected, retry, lost,
	// failed, held: waiting for its paused route; busy: its job under way
	// in this process).
	Submission func(route, kind, outcome string)
	// Orphans counts intake messages removed although acknowledged
	// (consume.SweepOrphans).
	Orphans func(n int)
	// Waiting counts submissions that found a level's running slots all
	// taken and went back to wait, by level ("account x").
	Waiting func(level string)
	// Repaired counts running slots the repair freed, by level.
	Repaired func(level string, n int)
	// Queue observes an admission queue: the jobs waiting in it and how
	// long the oldest has waited.
	Queue func(queue string, waiting int, oldest time.Duration)
}

// Config configures the service. Zero values mean the defaults on each field.
type Config struct {
	// Routes are the routes this process serves.
	Routes map[string]*route.Route
	// ModelRoutes are the model routes it may serve: those whose members
	// it serves all of (see route.ModelRoute and model.go).
	ModelRoutes map[string]*route.ModelRoute
	// NotifyURLs accepts submissions that name an endpoint of their own
	// (notify_url; the configuration's notify.submissions); without it
	// they are rejected.
	NotifyURLs bool
	// Apps are the apps a submission or track request may name (the
	// configuration's apps); one naming another is rejected. None: any.
	Apps []string
	// Spend admits each job against its app's budget (nil: nothing is
	// priced); one over it is rejected.
	Spend *spend.Keeper
	// Options size the streams (see events.Options).
	Options events.Options
	// SweepInterval is how often intake on unserved routes is looked for
	// (default 5s).
	SweepInterval time.Duration
	// Sweep is how often the consumers' orphans are looked for (default
	// consume.DefaultSweep).
	Sweep time.Duration
	// RepairInterval is how often running slots no job holds are looked
	// for (default route.RepairInterval), and RepairGrace how old a slot
	// no record names must be to be freed (default route.RepairGrace).
	RepairInterval, RepairGrace time.Duration
	// Logger receives the service's log lines (default: none).
	Logger zerolog.Logger
	// Metrics observe the service.
	Metrics Metrics
	// Learned returns the learned durations (nil: none are learned).
	Learned route.Learned
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Seed seeds the jitter (default: random).
	Seed uint64
}

// Service is a running ingester.
type Service struct {
	cfg  Config
	js   jetstream.JetStream
	res  *events.Resources
	jobs jobs.Intake
	ns   events.Namespace
	log  zerolog.Logger
	rnd  *rand.Rand

	// gates are the process's gates to the providers (budgets at every
	// level, running slots, pauses); gate is each route's, opened by Run
	// with its submit budgets.
	gates *route.Gates
	gate  map[string]*route.Gate
	// queues are the admission queues of the capped routes, by queue
	// name (route.Route.Queue); waiting is their tickets' stream.
	queues  map[string]*queue
	waiting jetstream.Stream
	// models are the model routes served (model.go).
	models map[string]*route.ModelRoute
	// underWay are the jobs this process is handling (underway.go).
	underWay underWay
	// reconnects says when NATS last came back for this process (doubt.go).
	reconnects reconnects
}

// New validates the configuration and prepares the service, which calls
// the providers through the process's gates.
func New(cfg Config, js jetstream.JetStream, ns events.Namespace, res *events.Resources, owner jobs.Intake, gates *route.Gates) (*Service, error) {
	if len(cfg.Routes) == 0 {
		return nil, errors.New("ingest: Routes: at least one route is required")
	}
	if gates == nil {
		return nil, errors.New("ingest: the process's gates are required")
	}
	cfg.SweepInterval = cmp.Or(cfg.SweepInterval, 5*time.Second)
	cfg.RepairInterval = cmp.Or(cfg.RepairInterval, route.RepairInterval)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{
		cfg: cfg, js: js, res: res, jobs: owner, gates: gates, ns: ns,
		log: cfg.Logger, rnd: schedule.NewRand(cfg.Seed),
	}, nil
}

// Run consumes every route's intake until ctx ends. Everything is set up
// before any route starts: a setup that fails returns with nothing left
// running.
func (s *Service) Run(ctx context.Context) error {
	s.gate, s.queues = map[string]*route.Gate{}, map[string]*queue{}
	consumers := map[string]jetstream.Consumer{}
	for _, r := range s.cfg.Routes {
		if err := s.setup(ctx, r, consumers); err != nil {
			return err
		}
	}
	models := s.servedModels()
	for name := range models {
		c, err := s.ensure(name)(ctx)
		if err != nil {
			return fmt.Errorf("model route %s: %w", name, err)
		}
		consumers[name] = c
	}
	s.models = models
	g, ctx := errgroup.WithContext(ctx)
	for _, r := range s.cfg.Routes {
		g.Go(func() error {
			return consume.Recreate(ctx, consumers[r.Name], s.ensure(r.Name), consume.Options{
				// No hold while the route is paused: its submissions are
				// stored and wait as held jobs (hold.go), its cancels of
				// them end them at once.
				Workers: r.SubmitWorkers,
				Stream:  s.res.Intake,
				Sweep:   s.cfg.Sweep,
				Swept:   s.cfg.Metrics.Orphans,
				Logger:  s.log.With().Str(logkey.Route, r.Name).Logger(),
			}, func(ctx context.Context, msg jetstream.Msg) events.Outcome {
				return s.handle(ctx, r, msg)
			})
		})
	}
	for _, mr := range models {
		workers := 0
		for _, m := range mr.Members {
			workers = max(workers, m.Route.SubmitWorkers)
		}
		g.Go(func() error {
			return consume.Recreate(ctx, consumers[mr.Name], s.ensure(mr.Name), consume.Options{
				Workers: workers,
				Stream:  s.res.Intake,
				Sweep:   s.cfg.Sweep,
				Swept:   s.cfg.Metrics.Orphans,
				Logger:  s.log.With().Str(logkey.ModelRoute, mr.Name).Logger(),
			}, func(ctx context.Context, msg jetstream.Msg) events.Outcome {
				return s.handleModel(ctx, mr, msg)
			})
		})
	}
	g.Go(func() error { return s.sweep(ctx) })
	g.Go(func() error { return s.repair(ctx) })
	g.Go(func() error { return s.watchReconnects(ctx) })
	for _, q := range s.queues {
		g.Go(func() error { return s.admitLoop(ctx, q) })
	}
	s.log.Info().Int(logkey.Routes, len(s.cfg.Routes)).Msg("ingest running")
	return g.Wait()
}

// setup makes a route's budgets and intake consumer.
func (s *Service) setup(ctx context.Context, r *route.Route, consumers map[string]jetstream.Consumer) error {
	sctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	g, err := s.gates.OpenSubmit(sctx, r)
	if err != nil {
		return err
	}
	s.gate[r.Name] = g
	if r.Capped() || s.gates.AppsCapRunning() {
		if s.waiting == nil {
			if s.waiting, err = events.EnsureStream(sctx, s.js, s.ns.WaitingStreamConfig(s.cfg.Options)); err != nil {
				return fmt.Errorf("route %s: admission queue: %w", r.Name, err)
			}
		}
		q := s.queues[r.Queue()]
		if q == nil {
			q = newQueue(r.Queue())
			s.queues[r.Queue()] = q
		}
		q.add(r)
	}
	consumers[r.Name], err = s.ensure(r.Name)(ctx)
	return err
}

// ensure returns the function that creates (or checks) a route's intake
// consumer.
func (s *Service) ensure(name string) func(context.Context) (jetstream.Consumer, error) {
	return func(ctx context.Context) (jetstream.Consumer, error) {
		sctx, cancel := context.WithTimeout(ctx, startupTimeout)
		defer cancel()
		return events.EnsureConsumer(sctx, s.res.Intake, s.ns.IngestConsumerConfig(name, s.cfg.Options))
	}
}

// handle dispatches one intake message of a route.
func (s *Service) handle(ctx context.Context, r *route.Route, msg jetstream.Msg) events.Outcome {
	return s.dispatch(ctx, msg, intake{routeName: r.Name, route: r}, func(ctx context.Context, in intake) (events.Outcome, string) {
		switch in.kind {
		case events.KindSubmit:
			return s.submit(ctx, in)
		case events.KindTrack:
			return s.track(ctx, in)
		}
		return s.cancel(ctx, in)
	})
}

// dispatch reads an intake message into in (named by its route or model
// route), has h handle it in its span, and counts the result.
func (s *Service) dispatch(ctx context.Context, msg jetstream.Msg, in intake, h func(context.Context, intake) (events.Outcome, string)) events.Outcome {
	kind, _, err := s.ns.ParseIntake(msg.Subject())
	if err != nil {
		s.log.Error().Err(err).Msg("intake message on an unexpected subject")
		return events.Stop()
	}
	md, err := msg.Metadata()
	if err != nil {
		s.log.Error().Err(err).Msg("intake message without metadata")
		return events.Stop()
	}
	in.kind, in.msg, in.seq, in.stored, in.attempt = kind, msg, md.Sequence.Stream, md.Timestamp, md.NumDelivered
	ctx, span := s.intakeSpan(ctx, msg, kind, in.routeName, in)
	out, result := h(ctx, in)
	endIntake(span, result)
	if s.cfg.Metrics.Submission != nil {
		s.cfg.Metrics.Submission(in.routeName, kind, result)
	}
	return out
}

// intake is one intake message being handled, or a job the admission
// queue starts (queued: no message; seq is the job's own intake seq).
type intake struct {
	kind      string
	routeName string
	route     *route.Route // nil on an unserved route
	msg       jetstream.Msg
	seq       uint64
	stored    time.Time
	attempt   uint64
	queued    bool
	// via is the model route the message came to; route is then the
	// member it was routed to.
	via string
}

func (in intake) logger(log zerolog.Logger, jobID string) zerolog.Logger {
	return log.With().Str(logkey.JobID, jobID).Str(logkey.Route, in.routeName).
		Str("kind", in.kind).Uint64(logkey.IntakeSeq, in.seq).Uint64(logkey.Attempt, in.attempt).Logger()
}

// retry is the outcome of a failure of ingest's own (NATS): the message
// comes back in about a second.
func (s *Service) retry(log zerolog.Logger, err error, what string) (events.Outcome, string) {
	log.Warn().Err(err).Msg(what + " failed; retrying")
	return events.Later(schedule.Jitter(time.Second, schedule.RetryJitter, s.rnd)), "retry"
}

// backoff is the wait before the next try of a provider call that
// failed n times in a row for reasons of its own: a create's are the job's
// SubmitFailures, never the tries a route pause sent back (those wait for
// the pause alone), a cancel's its message's deliveries.
func (s *Service) backoff(n int) time.Duration {
	return schedule.Backoff{Base: time.Second, Max: time.Minute}.Next(n, s.rnd)
}

// reject publishes a rejected event naming the problem; the message ends.
func (s *Service) reject(ctx context.Context, in intake, jobID string, err error) (events.Outcome, string) {
	rj := events.Rejection{Kind: in.kind, Subject: s.ns.Intake(in.kind, in.routeName), IntakeSeq: in.seq, Error: err.Error()}
	if in.msg != nil {
		rj.Subject = in.msg.Subject()
	}
	var fe *events.FieldError
	if errors.As(err, &fe) {
		rj.Field = fe.Field
	}
	if rj.Budget = spend.Refusal(err); rj.Budget != nil {
		rj.Field = rj.Budget.Field()
	}
	if in.msg != nil {
		rj.App = appOf(in.msg.Data())
	}
	log := in.logger(s.log, jobID)
	if perr := s.jobs.Reject(ctx, in.routeName, jobID, rj); perr != nil {
		log.Warn().Err(perr).Msg("publishing a rejection failed; retrying the message")
		return events.Later(2 * time.Second), "retry"
	}
	log.Info().Str(logkey.Problem, err.Error()).Msg("request rejected")
	return events.Stop(), "rejected"
}

// appOf is the app a message names, when it names a valid one: its
// rejection is that app's to see.
func appOf(data []byte) string {
	var m struct {
		App string `json:"app"`
	}
	if json.Unmarshal(data, &m) != nil || !events.ValidApp(m.App) {
		return ""
	}
	return m.App
}

// attemptID is a new submit attempt's random id.
func (s *Service) attemptID() string {
	return strconv.FormatUint(s.rnd.Uint64(), 36)
}

// callTimeout is the route's timeout of a create.
func (s *Service) callTimeout(r *route.Route) time.Duration {
	return s.gate[r.Name].Timeout(route.OpSubmit)
}
