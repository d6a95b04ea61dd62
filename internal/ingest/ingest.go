// Package ingest is cmd/ingest's service: it consumes the intake subjects of
// every configured route (one durable consumer per route, so a slow or
// paused route never holds up another), submits jobs to providers exactly
// once, starts tracking jobs submitted elsewhere, cancels jobs, and rejects
// bad requests with an event that names the problem. Intake on routes that
// no process serves is swept up and rejected too.
//
// Ingest decides (decide.go: what a submission needs next, what a failed
// call means, how a submission in doubt is resolved) and hands what it
// decided to the jobs' owner (package jobs), which alone writes a job.
// A submission's record is created with its first attempt marked, just
// before the call, so a process that dies during the call leaves the
// attempt in doubt; the provider's answer, once in hand, is recorded
// however long NATS is away.
//
// With tracing on (package tracing), handling an intake message is a span,
// a child of the submitter's span when the message's traceparent header
// names one, and the job created in it takes its context as the job's
// trace; each provider call is a span in that trace (trace.go).
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
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/consume"
	"github.com/pollux-dev/pollux/internal/faultpoint"
	"github.com/pollux-dev/pollux/internal/jobs"
	"github.com/pollux-dev/pollux/internal/route"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// startupTimeout bounds the JetStream calls made before the service runs.
const startupTimeout = 30 * time.Second

// Metrics observe the service; nil fields are ignored. They must not block.
type Metrics struct {
	// Submission counts intake messages by route, kind and outcome
	// (submitted, tracked, canceled, duplicate, rejected, retry, lost,
	// failed, held: waiting for its paused route).
	Submission func(route, kind, outcome string)
	// ProviderCall observes a submit, find or cancel call by route,
	// operation and result class ("ok" or a provider error class).
	ProviderCall func(route, op, class string, d time.Duration)
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
	// Options size the streams (see events.Options).
	Options events.Options
	// SweepInterval is how often intake on unserved routes is looked for
	// (default 5s).
	SweepInterval time.Duration
	// Sweep is how often the consumers' orphans are looked for (default
	// consume.DefaultSweep).
	Sweep time.Duration
	// CallTimeout bounds one provider call (default 30s).
	CallTimeout time.Duration
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
	cfg    Config
	js     jetstream.JetStream
	res    *events.Resources
	jobs   *jobs.Owner
	pauses *route.Pauses
	ns     events.Namespace
	log    zerolog.Logger
	rnd    *rand.Rand

	// gates are the routes' gates to their providers (budgets at every
	// level, running slots), set up by Run; gate is each route's.
	gates *route.Gates
	gate  map[string]*route.Gate
	// queues are the admission queues of the capped routes, by queue
	// name (route.Route.Queue); waiting is their tickets' stream.
	queues  map[string]*queue
	waiting jetstream.Stream
	// models are the model routes served (model.go).
	models map[string]*route.ModelRoute
}

// New validates the configuration and prepares the service.
func New(cfg Config, js jetstream.JetStream, ns events.Namespace, res *events.Resources, owner *jobs.Owner, pauses *route.Pauses) (*Service, error) {
	if len(cfg.Routes) == 0 {
		return nil, errors.New("ingest: Routes: at least one route is required")
	}
	cfg.SweepInterval = cmp.Or(cfg.SweepInterval, 5*time.Second)
	cfg.CallTimeout = cmp.Or(cfg.CallTimeout, 30*time.Second)
	cfg.RepairInterval = cmp.Or(cfg.RepairInterval, route.RepairInterval)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{
		cfg: cfg, js: js, res: res, jobs: owner, pauses: pauses, ns: ns,
		log: cfg.Logger, rnd: schedule.NewRand(cfg.Seed),
	}, nil
}

// Run consumes every route's intake until ctx ends. Everything is set up
// before any route starts: a setup that fails returns with nothing left
// running.
func (s *Service) Run(ctx context.Context) error {
	s.gates = route.NewGates(s.js, s.ns, s.res.Slots, s.cfg.Options, s.pauses, route.GateConfig{
		Submit: true, CallTimeout: s.cfg.CallTimeout, Logger: s.log, Rand: s.rnd,
		Observe: func(routeName string, op route.Op, class string, d time.Duration) {
			if s.cfg.Metrics.ProviderCall != nil {
				s.cfg.Metrics.ProviderCall(routeName, string(op), class, d)
			}
		},
	})
	s.gate, s.queues = map[string]*route.Gate{}, map[string]*queue{}
	defer s.gates.Close() // leases kept for reuse go back to the fleet now
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
				Logger:  s.log.With().Str("route", r.Name).Logger(),
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
				Logger:  s.log.With().Str("model_route", mr.Name).Logger(),
			}, func(ctx context.Context, msg jetstream.Msg) events.Outcome {
				return s.handleModel(ctx, mr, msg)
			})
		})
	}
	g.Go(func() error { return s.sweep(ctx) })
	g.Go(func() error { return s.repair(ctx) })
	for _, q := range s.queues {
		g.Go(func() error { return s.admitLoop(ctx, q) })
	}
	s.log.Info().Int("routes", len(s.cfg.Routes)).Msg("ingest running")
	return g.Wait()
}

// setup makes a route's budgets and intake consumer.
func (s *Service) setup(ctx context.Context, r *route.Route, consumers map[string]jetstream.Consumer) error {
	sctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	g, err := s.gates.Open(sctx, r)
	if err != nil {
		return err
	}
	s.gate[r.Name] = g
	if r.Capped() {
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
	return log.With().Str("job_id", jobID).Str("route", in.routeName).
		Str("kind", in.kind).Uint64("intake_seq", in.seq).Uint64("attempt", in.attempt).Logger()
}

// retry is the outcome of a failure of ingest's own (NATS): the message
// comes back in about a second.
func (s *Service) retry(log zerolog.Logger, err error, what string) (events.Outcome, string) {
	log.Warn().Err(err).Msg(what + " failed; retrying")
	return events.Later(schedule.Jitter(time.Second, schedule.RetryJitter, s.rnd)), "retry"
}

// backoff is the wait before the next attempt of a provider call that
// failed on the message's attempt-th delivery.
func (s *Service) backoff(in intake) time.Duration {
	return schedule.Backoff{Base: time.Second, Max: time.Minute}.Next(int(in.attempt), s.rnd)
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
	log := in.logger(s.log, jobID)
	if perr := s.jobs.Reject(ctx, in.routeName, jobID, rj); perr != nil {
		log.Warn().Err(perr).Msg("publishing a rejection failed; retrying the message")
		return events.Later(2 * time.Second), "retry"
	}
	log.Info().Str("problem", err.Error()).Msg("request rejected")
	return events.Stop(), "rejected"
}

// attemptID is a new submit attempt's random id.
func (s *Service) attemptID() string {
	return strconv.FormatUint(s.rnd.Uint64(), 36)
}

// callTimeout is the route's provider call timeout.
func (s *Service) callTimeout(r *route.Route) time.Duration {
	return s.gate[r.Name].Timeout()
}

// submit handles a submission: dedupe, submit once, arm the check.
func (s *Service) submit(ctx context.Context, in intake) (events.Outcome, string) {
	data := in.msg.Data()
	m, err := events.DecodeSubmit(data)
	if err != nil {
		return s.reject(ctx, in, rejectionID(in.kind, in.routeName, data, in.seq, in.stored), err)
	}
	id := jobID(in.route.Name, m, in.seq, in.stored)
	if m.HedgeOf != "" {
		return s.submitHedge(ctx, in, m, id)
	}
	return s.submitJob(ctx, in, m, id, nil)
}

// submitJob submits job id of submission m on in's route; routing is how
// a model route chose the route (nil for a submission to it).
func (s *Service) submitJob(ctx context.Context, in intake, m *events.Submit, id string, routing *state.Routing) (events.Outcome, string) {
	now := s.cfg.Now().UTC()
	r := in.route
	// A relative deadline counts from the submission's acceptance, not
	// from this delivery: a submission that waited has waited its time.
	dl, err := deadline(r, m.Deadline, m.TimeoutS, in.stored)
	if err != nil {
		return s.reject(ctx, in, id, err)
	}
	if m.NotifyURL != "" && !s.cfg.NotifyURLs {
		return s.reject(ctx, in, id, &events.FieldError{Field: "notify_url",
			Problem: "this deployment does not call submissions' own endpoints (notify.submissions is not configured)"})
	}
	log := in.logger(s.log, id)
	j := &state.Job{
		ID: id, Route: r.Name, Model: m.Model, ConfigKey: r.ConfigKey(m.ConfigKey, m.Input), Length: r.Length(m.Input), State: state.Pending,
		NotifyURL: m.NotifyURL, KeepInput: r.KeepInputs,
		Input: m.Input, Metadata: m.Metadata, IdempotencyKey: cmp.Or(m.IdempotencyKey, id), IntakeSeq: in.seq,
		CreatedAt: now, Deadline: dl,
		ExpectedDuration: state.Duration(m.ExpectedDurationS * float64(time.Second)),
		WebhookExpected:  r.WebhookURL != "" && (m.Webhook == nil || *m.Webhook),
		Routing:          routing,
		SubmittedBy:      m.By, SubmitReason: m.Reason, ResubmitOf: m.ResubmitOf,
	}
	if _, why := s.paused(r); why != "" {
		// Stored to wait (seen, and cancelable, meanwhile): submitAgain
		// holds it until the pause ends.
		j.WaitingFor = why
		return s.store(ctx, in, j, log)
	}
	if in.attempt > 1 || !now.Before(dl) {
		// A redelivery: the job is most likely stored already (waiting for
		// a slot or a pause's end, in doubt, created); its record says
		// what is next. One whose deadline passed while it waited expires
		// without a create (submitAgain).
		return s.store(ctx, in, j, log)
	}
	// The record is created with its first attempt marked and its running
	// slots named, right before the call: a slot must be free at every
	// level, and the route free to call.
	if q := s.queues[r.Queue()]; q != nil && q.busy() {
		// Others wait for the slots: it queues behind them.
		j.WaitingFor = "queue " + q.name
		return s.enqueue(ctx, in, j, false, log)
	}
	g := s.gate[r.Name]
	slots, full, err := g.Take(ctx, id, nil)
	if err != nil {
		return s.retry(log, err, "taking a running slot")
	}
	if full != "" {
		j.WaitingFor = full
		return s.enqueue(ctx, in, j, false, log)
	}
	j.Slots = slots
	var rec jobs.Record
	var created bool
	var span trace.Span
	ans := g.Call(ctx, route.Call{Op: route.OpSubmit, Request: s.request(r, j), Log: &log,
		Ready: func(ctx context.Context) (context.Context, bool) {
			j.SubmitAttempts, j.SubmitInDoubt, j.AttemptedAt, j.AttemptID = 1, true, now, s.attemptID()
			rec, created, err = s.jobs.Accept(ctx, j)
			if err != nil || !created {
				return ctx, false
			}
			ctx, span = s.callSpan(ctx, r, "submit", rec.Job)
			return ctx, true
		}})
	switch {
	case ans.Called:
		endCall(span, ans.Status, ans.Err)
		return s.answered(ctx, in, rec, ans, log)
	case !ans.Skipped:
		return events.Later(ans.Wait), "retry" // a slot taken stays the job's: its next delivery finds it
	case err != nil:
		return s.retry(log, err, "creating the job")
	}
	if st := nextStep(rec.Job, in.routeName, in.seq); st == stepFinished || st == stepResume {
		// Created or ended already (a redelivery): the slots just taken
		// that its record does not name are nobody's.
		if err := g.Free(ctx, id, rec.Slots); err != nil {
			log.Warn().Err(err).Msg("freeing running slots taken for a job created already failed; the repair frees them")
		}
	}
	return s.resume(ctx, in, rec, log)
}

// store stores a submission's job without a submit attempt, and takes it
// from there as a redelivery would.
func (s *Service) store(ctx context.Context, in intake, j *state.Job, log zerolog.Logger) (events.Outcome, string) {
	rec, _, err := s.jobs.Accept(ctx, j)
	if err != nil {
		return s.retry(log, err, "creating the job")
	}
	return s.resume(ctx, in, rec, log)
}

// enqueue stores a submission's job, waiting (so that it can be seen,
// and canceled, while it waits), and publishes its admission ticket: the
// job waits in JetStream for the admission queue (queue.go) to start it.
// The intake message is done then. A job stored already is taken from
// where it stands; one handled by the queue itself just goes back to it.
func (s *Service) enqueue(ctx context.Context, in intake, j *state.Job, stored bool, log zerolog.Logger) (events.Outcome, string) {
	r := in.route
	if in.queued {
		return events.Later(slotWait), "waiting"
	}
	if !stored {
		rec, created, err := s.jobs.Accept(ctx, j)
		if err != nil {
			return s.retry(log, err, "creating the job")
		}
		if !created && nextStep(rec.Job, in.routeName, in.seq) != stepSubmit {
			return s.resume(ctx, in, rec, log) // moved on meanwhile
		}
	}
	b, err := json.Marshal(events.Ticket{V: events.Version, JobID: j.ID, Route: r.Name})
	if err != nil {
		return s.retry(log, err, "encoding the admission ticket")
	}
	q := s.queues[r.Queue()]
	if _, err := s.js.Publish(ctx, s.ns.Waiting(q.name, r.Tenant(j.Metadata)), b, jetstream.WithMsgID(events.TicketID(j.ID, j.AttemptID))); err != nil {
		return s.retry(log, err, "queueing the job for a running slot")
	}
	q.queued()
	if s.cfg.Metrics.Waiting != nil {
		s.cfg.Metrics.Waiting(cmp.Or(j.WaitingFor, "queue "+q.name))
	}
	log.Debug().Str("waiting_for", j.WaitingFor).Msg("waiting for a running slot")
	return events.Done(), "waiting"
}

// slotWait is how long a job the admission queue tried to start, and that
// found a level full, waits before it is tried again.
const slotWait = time.Second

// resume takes a submission whose job exists from wherever it stands.
func (s *Service) resume(ctx context.Context, in intake, rec jobs.Record, log zerolog.Logger) (events.Outcome, string) {
	switch nextStep(rec.Job, in.routeName, in.seq) {
	case stepReject:
		if in.via != "" && rec.Routing != nil && rec.Routing.Via == in.via && rec.IntakeSeq != in.seq {
			// Another submission to the model route made the job first
			// (and routed it elsewhere): this one is a duplicate.
			return events.Done(), "duplicate"
		}
		return s.reject(ctx, in, rec.ID, &events.FieldError{Field: "id", Problem: fmt.Sprintf("already used by a job on route %s", rec.Route)})
	case stepDuplicate:
		log.Debug().Uint64("owner_seq", rec.IntakeSeq).Msg("duplicate submission; the job exists")
		return events.Done(), "duplicate"
	case stepFinished:
		if err := s.jobs.Resume(ctx, rec); err != nil {
			return s.retry(log, err, "publishing the job's events")
		}
		return events.Done(), "duplicate"
	case stepResume:
		if err := s.jobs.Resume(ctx, rec); err != nil {
			return s.retry(log, err, "arming the job's check")
		}
		return events.Done(), "submitted"
	case stepCancel:
		obs := state.Observation{State: state.Canceled, Reason: "canceled before it was submitted", Source: state.FromCancel, At: s.cfg.Now().UTC()}
		if _, err := s.jobs.End(ctx, rec, obs); err != nil {
			return s.retry(log, err, "recording the cancel")
		}
		return events.Done(), "canceled"
	case stepInDoubt:
		return s.inDoubt(ctx, in, rec, false, log)
	}
	return s.submitAgain(ctx, in, rec, log)
}

// submitAgain makes another submit call for a job whose submission is
// not known to have reached the provider: its running slots, a lease, the
// attempt marked, then the call — unless the record moved on meanwhile.
// A job that never reached the provider and whose deadline has passed
// (it waited for a slot that long) expires instead, without a create.
func (s *Service) submitAgain(ctx context.Context, in intake, rec jobs.Record, log zerolog.Logger) (events.Outcome, string) {
	if !rec.SubmitInDoubt && !s.cfg.Now().Before(rec.Deadline) {
		obs := state.Observation{State: state.Expired, Reason: "the deadline passed before the job could be submitted", Source: state.FromPollux, At: s.cfg.Now().UTC()}
		if _, err := s.jobs.End(ctx, rec, obs); err != nil {
			return s.retry(log, err, "recording the job expired")
		}
		log.Info().Str("waited_for", rec.WaitingFor).Msg("expired before it was submitted")
		return events.Done(), "expired"
	}
	if d, why := s.paused(in.route); why != "" && !rec.SubmitInDoubt {
		return s.hold(ctx, in, rec, d, why, log)
	}
	g := s.gate[in.routeName]
	slots, full, err := g.Take(ctx, rec.ID, rec.Slots)
	if err != nil {
		return s.retry(log, err, "taking a running slot")
	}
	if full != "" {
		if rec, err = s.jobs.Hold(ctx, rec, full); err != nil {
			return s.retry(log, err, "recording the job waiting for a running slot")
		}
		return s.enqueue(ctx, in, rec.Job, true, log)
	}
	// Exclusive unless resolving a doubt: a job the queue and a
	// redelivery start at once is attempted once.
	attempt := s.attemptID()
	var span trace.Span
	ans := g.Call(ctx, route.Call{Op: route.OpSubmit, Request: s.request(in.route, rec.Job), Log: &log,
		Ready: func(ctx context.Context) (context.Context, bool) {
			rec, err = s.jobs.Attempt(ctx, rec, attempt, slots, !rec.SubmitInDoubt)
			if err != nil || rec.AttemptID != attempt {
				return ctx, false
			}
			ctx, span = s.callSpan(ctx, in.route, "submit", rec.Job)
			return ctx, true
		}})
	switch {
	case ans.Called:
		endCall(span, ans.Status, ans.Err)
		return s.answered(ctx, in, rec, ans, log)
	case !ans.Skipped:
		return events.Later(ans.Wait), "retry"
	case err != nil:
		return s.retry(log, err, "recording the submit attempt")
	}
	// Changed meanwhile: another process's attempt, or the job moved on.
	if rec.SubmitInDoubt && rec.RemoteID == "" && !rec.State.Terminal() {
		return events.Later(s.callTimeout(in.route)), "retry"
	}
	return s.resume(ctx, in, rec, log)
}

// inDoubt resolves a submission whose last call's outcome is unknown.
// After a call this handler just made (interrupted), a retry or a lookup
// waits for the message's next delivery: the provider gets time, and
// calls do not follow each other in a loop.
func (s *Service) inDoubt(ctx context.Context, in intake, rec jobs.Record, interrupted bool, log zerolog.Logger) (events.Outcome, string) {
	r := in.route
	res, until := resolve(rec.Job, r.Adapter.Info(), r.CanFind(), s.callTimeout(r), s.cfg.Now())
	switch {
	case res == resolveWait:
		return events.Later(until.Sub(s.cfg.Now())), "retry"
	case interrupted && res == resolveRetry:
		return events.Later(s.backoff(in)), "retry"
	}
	switch res {
	case resolveLost:
		return s.giveUp(ctx, in, rec, lostReason(r, rec.Job), log)
	case resolveFind:
		ans := s.find(ctx, r, rec.Job)
		switch err := ans.Err; {
		case errors.Is(err, provider.ErrCannotTell) && r.Adapter.Info().Idempotent:
			log.Info().Err(err).Msg("the provider cannot tell whether it has the submission in doubt; it deduplicates, so submitting it again")
			return s.submitAgain(ctx, in, rec, log)
		case errors.Is(err, provider.ErrCannotTell):
			return s.giveUp(ctx, in, rec, cannotTellReason(r, rec.Job, err), log)
		case err != nil || !ans.Called:
			log.Warn().Err(err).Bool("paused", ans.Paused).Msg("looking the submission in doubt up at the provider failed; retrying")
			return events.Later(s.backoff(in)), "retry"
		case ans.Found:
			log.Info().Str("remote_id", ans.Status.RemoteID).Msg("the submission in doubt was found at the provider")
			return s.created(ctx, in, rec, ans.Status, log)
		}
		log.Info().Msg("the provider does not have the submission in doubt; submitting it")
	}
	// Submit again: the provider deduplicates, or it said it has no such
	// job.
	return s.submitAgain(ctx, in, rec, log)
}

// giveUp ends a submission in doubt as lost, for reason — unless its
// attempt's own process recorded the job meanwhile.
func (s *Service) giveUp(ctx context.Context, in intake, rec jobs.Record, reason string, log zerolog.Logger) (events.Outcome, string) {
	obs := state.Observation{State: state.Lost, Reason: reason, Source: state.FromPollux, At: s.cfg.Now().UTC()}
	after, err := s.jobs.GiveUp(ctx, rec, obs)
	if err != nil {
		return s.retry(log, err, "recording the job lost")
	}
	if !after.State.Terminal() || after.State != state.Lost {
		return s.resume(ctx, in, after, log) // recorded meanwhile by the attempt's own process
	}
	log.Error().Str("reason", reason).Msg("submission in doubt after an interrupted call; marked lost rather than risk a duplicate")
	return events.Done(), "lost"
}

// find asks the provider for the job a submission created, under the
// status budget.
func (s *Service) find(ctx context.Context, r *route.Route, j *state.Job) route.Answer {
	g := s.gate[r.Name]
	req := s.request(r, j)
	req.AttemptedAt, req.AttemptEnded = j.AttemptedAt, j.AttemptedAt.Add(g.Timeout())
	var span trace.Span
	ans := g.Call(ctx, route.Call{Op: route.OpFind, Request: req, Ready: func(ctx context.Context) (context.Context, bool) {
		ctx, span = s.callSpan(ctx, r, "find", nil)
		return ctx, true
	}})
	if ans.Called {
		endCall(span, provider.Status{}, ans.Err)
	}
	return ans
}

func (s *Service) request(r *route.Route, j *state.Job) provider.SubmitRequest {
	req := provider.SubmitRequest{
		JobID: j.ID, Model: j.Model, Input: j.Input, IdempotencyKey: j.IdempotencyKey, Deadline: j.Deadline,
	}
	if j.WebhookExpected {
		req.WebhookURL = r.JobWebhookURL(j.ID)
	}
	return req
}

// answered carries out the answer to the submit call the record's
// attempt marked.
func (s *Service) answered(ctx context.Context, in intake, rec jobs.Record, ans route.Answer, log zerolog.Logger) (events.Outcome, string) {
	if ans.Err != nil {
		return s.submitFailed(ctx, in, rec, ans.Err, log)
	}
	faultpoint.Hit("after-submit") // the provider has the job; the record does not know yet
	return s.created(ctx, in, rec, ans.Status, log)
}

// created records the provider's acceptance of the job (the owner keeps
// retrying until it lands) and cancels the job at once if a cancel came
// meanwhile.
func (s *Service) created(ctx context.Context, in intake, rec jobs.Record, st provider.Status, log zerolog.Logger) (events.Outcome, string) {
	r := in.route
	now := s.cfg.Now().UTC()
	obs := st.Observation
	obs.Source, obs.At = state.FromSubmit, now
	c := jobs.Created{RemoteID: st.RemoteID, Obs: obs}
	if len(st.RefData) <= provider.MaxRefData {
		c.Ref = st.RefData
	}
	ps := events.PollStateOf(rec.Job)
	ps.State, ps.SubmittedAt = state.Queued, cmp.Or(st.CreatedAt, now)
	c.Due = now.Add(r.NextPoll(ps, now, route.HintsOf(st), s.cfg.Learned, s.rnd))
	rec, err := s.jobs.Submitted(ctx, rec, c)
	if err != nil {
		// Only a stop cuts this short (the owner logged the remote id);
		// the message comes back to a process that finds the attempt in
		// doubt.
		return events.Later(time.Second), "retry"
	}
	log.Info().Str("remote_id", rec.RemoteID).Str("state", string(rec.State)).Msg("submitted")
	s.indexRemote(ctx, r, rec.Job, log)
	if !rec.CancelRequestedAt.IsZero() && !rec.State.Terminal() {
		// The cancel's own message has gone: this one carries it out.
		for {
			err := s.cancelRemote(ctx, r, rec, log)
			var p *paused
			if !errors.As(err, &p) {
				if err != nil {
					log.Warn().Err(err).Msg("canceling the job after it was submitted failed; polling follows it")
				}
				break
			}
			if !schedule.Sleep(ctx, p.wait) {
				break
			}
		}
	}
	return events.Done(), "submitted"
}

// submitFailed carries out what a failed submit call means.
func (s *Service) submitFailed(ctx context.Context, in intake, rec jobs.Record, err error, log zerolog.Logger) (events.Outcome, string) {
	r := in.route
	log = log.With().Str("error_class", provider.ClassOf(err).String()).Logger()
	switch failed(err) {
	case outRefused:
		reason := "the provider refused the submission: " + provider.MessageOf(err)
		obs := state.Observation{State: state.Failed, Reason: reason, Source: state.FromSubmit, At: s.cfg.Now().UTC()}
		if _, uerr := s.jobs.Refused(ctx, rec, provider.MessageOf(err), &obs); uerr != nil {
			return s.retry(log, uerr, "recording the refusal")
		}
		log.Info().Str("reason", reason).Msg("submission refused by the provider")
		return events.Done(), "failed"
	case outPaused:
		if r.SlotRefusal(err) {
			// The provider runs as many as it allows: the job gives its
			// slots back and waits for one (its running cap, if learned,
			// came down meanwhile: learn).
			after, uerr := s.jobs.Requeue(ctx, rec, provider.MessageOf(err), "the provider's running cap")
			if uerr != nil {
				return s.retry(log, uerr, "putting the job back to wait for a slot")
			}
			log.Info().Msg("the provider refused the create for its cap on jobs running at once; waiting for a slot")
			return s.enqueue(ctx, in, after.Job, true, log)
		}
		if _, uerr := s.jobs.Refused(ctx, rec, provider.MessageOf(err), nil); uerr != nil {
			return s.retry(log, uerr, "clearing the attempt")
		}
		return events.Later(s.pauses.Hold(r) + schedule.Jitter(100*time.Millisecond, schedule.RetryJitter, s.rnd)), "retry"
	case outAnswered:
		if _, uerr := s.jobs.Refused(ctx, rec, provider.MessageOf(err), nil); uerr != nil {
			return s.retry(log, uerr, "clearing the attempt")
		}
		backoff := s.backoff(in)
		log.Warn().Err(err).Dur("retry_in", backoff).Msg("submit failed; retrying")
		return events.Later(backoff), "retry"
	}
	log.Warn().Err(err).Msg("the submit call got no answer; its outcome is in doubt")
	return s.inDoubt(ctx, in, rec, true, log)
}

// track starts tracking a job submitted elsewhere.
func (s *Service) track(ctx context.Context, in intake) (events.Outcome, string) {
	now := s.cfg.Now().UTC()
	data := in.msg.Data()
	m, err := events.DecodeTrack(data)
	if err != nil {
		return s.reject(ctx, in, rejectionID(in.kind, in.routeName, data, in.seq, in.stored), err)
	}
	r := in.route
	id := cmp.Or(m.ID, events.RemoteKeyID(r.Name, m.RemoteID))
	dl, err := deadline(r, m.Deadline, m.TimeoutS, now)
	if err != nil {
		return s.reject(ctx, in, id, err)
	}
	j := &state.Job{
		ID: id, Route: r.Name, Model: m.Model, ConfigKey: m.ConfigKey, RemoteID: m.RemoteID,
		State: state.Queued, Metadata: m.Metadata, Tracked: true, IntakeSeq: in.seq,
		CreatedAt: now, SubmittedAt: now, ChangedAt: now, Deadline: dl,
		ExpectedDuration: state.Duration(m.ExpectedDurationS * float64(time.Second)),
		WebhookExpected:  r.WebhookURL != "" && m.Webhook != nil && *m.Webhook,
	}
	j.Record(events.EventSubmitted, now)
	j.NextCheckAt = now.Add(r.NextPoll(events.PollStateOf(j), now, route.Hints{}, s.cfg.Learned, s.rnd))
	log := in.logger(s.log, id).With().Str("remote_id", m.RemoteID).Logger()

	rec, created, err := s.jobs.Accept(ctx, j)
	switch {
	case err != nil:
		return s.retry(log, err, "tracking the job")
	case created:
		log.Info().Msg("tracking")
		s.indexRemote(ctx, r, rec.Job, log)
		return events.Done(), "tracked"
	case rec.Route != r.Name || rec.RemoteID != m.RemoteID:
		return s.reject(ctx, in, id, &events.FieldError{Field: "id", Problem: fmt.Sprintf("already used by job of remote id %s on route %s", rec.RemoteID, rec.Route)})
	}
	if err := s.jobs.Resume(ctx, rec); err != nil {
		return s.retry(log, err, "arming the job's check")
	}
	return events.Done(), "duplicate"
}

// cancel cancels a job.
func (s *Service) cancel(ctx context.Context, in intake) (events.Outcome, string) {
	data := in.msg.Data()
	m, err := events.DecodeCancel(data)
	if err != nil {
		return s.reject(ctx, in, rejectionID(in.kind, in.routeName, data, in.seq, in.stored), err)
	}
	log := in.logger(s.log, m.ID)
	rec, err := s.jobs.RequestCancelBy(ctx, in.routeName, m.ID, m.Reason, m.By)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return s.reject(ctx, in, m.ID, &events.FieldError{Field: "id", Problem: "no such job"})
	case errors.Is(err, jobs.ErrOtherRoute):
		return s.reject(ctx, in, m.ID, &events.FieldError{Field: "id", Problem: fmt.Sprintf("the job is on route %s, not %s", rec.Route, in.routeName)})
	case err != nil:
		return s.retry(log, err, "recording the cancel request")
	}
	switch cancelNext(rec.Job, in.route.Adapter.Info().Cancel) {
	case cancelFinished:
		log.Info().Str("state", string(rec.State)).Msg("cancel of a finished job ignored")
		return events.Done(), "duplicate"
	case cancelUnsubmitted:
		if !rec.SubmitInDoubt {
			// Not reaching the provider (waiting for a slot, or between
			// tries): it ends now; a call that starts meanwhile sees the
			// request instead.
			obs := state.Observation{State: state.Canceled, Reason: "canceled before it was submitted", Source: state.FromCancel, At: s.cfg.Now().UTC()}
			if _, err := s.jobs.Withdraw(ctx, rec, obs); err != nil {
				return s.retry(log, err, "recording the cancel")
			}
		}
		log.Info().Msg("cancel requested before submission")
		return events.Done(), "canceled"
	case cancelUnsupported:
		return s.reject(ctx, in, m.ID, fmt.Errorf("route %s's provider cannot cancel jobs; the job is still tracked", in.routeName))
	}
	err = s.cancelRemote(ctx, in.route, rec, log)
	var p *paused
	switch {
	case errors.As(err, &p):
		return events.Later(p.wait), "retry"
	case err != nil:
		return events.Later(s.backoff(in)), "retry"
	}
	return events.Done(), "canceled"
}

// indexRemote records the job's remote id in the remote index when its
// route's webhooks name only the remote job (see jobs.Owner.IndexRemote).
// Best effort, a few tries: without the entry, the job's webhook cannot be
// routed, and its polls find its end anyway.
func (s *Service) indexRemote(ctx context.Context, r *route.Route, j *state.Job, log zerolog.Logger) {
	if !r.Adapter.Info().WebhooksByRemoteID || j.RemoteID == "" {
		return
	}
	var err error
	for try := range 3 {
		if err = s.jobs.IndexRemote(ctx, r.Name, j.RemoteID, j.ID); err == nil {
			return
		}
		if !schedule.Sleep(ctx, time.Duration(try+1)*200*time.Millisecond) {
			break
		}
	}
	log.Warn().Err(err).Msg("indexing the remote id failed: the provider's webhooks for this job cannot be routed; polls follow it")
}

// paused is the refusal of a call because the route is paused: wait is
// how long until it may be made.
type paused struct{ wait time.Duration }

func (p *paused) Error() string { return fmt.Sprintf("the route is paused for %s", p.wait) }

// cancelRemote asks the provider to cancel the job and hands its answer to
// the owner.
func (s *Service) cancelRemote(ctx context.Context, r *route.Route, rec jobs.Record, log zerolog.Logger) error {
	var span trace.Span
	ans := s.gate[r.Name].Call(ctx, route.Call{Op: route.OpCancel, Ref: provider.JobRef(rec.Job), Log: &log,
		Ready: func(ctx context.Context) (context.Context, bool) {
			ctx, span = s.callSpan(ctx, r, "cancel", nil)
			return ctx, true
		}})
	switch {
	case ans.Paused:
		return &paused{wait: ans.Wait}
	case !ans.Called:
		return ans.Err
	}
	endCall(span, provider.Status{}, ans.Err)
	if err := ans.Err; err != nil {
		if provider.ClassOf(err) == provider.NotFound {
			log.Warn().Msg("cancel: the provider does not know the job; polling will reconcile")
			return nil
		}
		log.Warn().Err(err).Msg("cancel call failed")
		return err
	}
	obs := ans.Status.Observation
	obs.Source, obs.At = state.FromCancel, s.cfg.Now().UTC()
	rec, err := s.jobs.Canceled(ctx, rec, obs)
	if err != nil {
		return err
	}
	log.Info().Str("state", string(rec.State)).Msg("cancel requested at the provider")
	return nil
}
