// Package poller is cmd/poller's service: it consumes the check messages of
// every configured route (one durable consumer per route and partition;
// any number of processes share them), polls the provider when a job's
// check comes due, and decides what follows: the next poll's time, which
// pkg/schedule computes, or the job's end (lost after NotFoundLimit
// "unknown job" answers, failed after refused status calls, expired at
// its deadline). What a poll changes is written by the jobs' owner
// (package jobs): the poller hands it the call's outcome and its
// decision, and settles the check message as the owner says — sent back
// with NakWithDelay, replaced, or ended.
//
// A check's first delivery only arms it (it waits out its due time); every
// later delivery is one status call. A poll that learns nothing touches no
// KV: the check goes back.
//
// Rate limits pause the whole route, authentication failures pause it with
// a growing backoff (jobs are not failed; route.Pauses.After decides),
// transient errors back off exponentially, and an "unknown job" answer is
// reconciled: after NotFoundLimit consecutive answers the job is lost —
// never resubmitted. At the deadline the last status call is made and a
// job still unfinished expires (and is canceled at the provider).
//
// With tracing on (package tracing), each poll is a span in its job's
// trace, whose context the check's poll state carries (trace.go).
package poller

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// startupTimeout bounds the JetStream calls made before the service runs.
const startupTimeout = 30 * time.Second

// Metrics observe the service; nil fields are ignored. They must not block.
type Metrics struct {
	// Lateness observes how late a check was delivered against its due time.
	Lateness func(route string, d time.Duration)
	// Age observes an unfinished job's age when its check comes due.
	Age func(route string, d time.Duration)
	// Orphans counts checks removed although acknowledged
	// (consume.SweepOrphans).
	Orphans func(n int)
	// DeadlineCancel counts what became of the provider cancel of a job
	// expired at its deadline, by route and one of DeadlineOutcomes.
	DeadlineCancel func(route, outcome string)
}

// DeadlineOutcomes are what becomes of the provider cancel of a job
// expired at its deadline: canceled; failed (the call failed; best
// effort, not retried); held (the route was paused or no budget lease
// came free); off (the route's cancel_on_deadline is false);
// unsupported (the adapter cannot cancel).
var DeadlineOutcomes = []string{"canceled", "failed", "held", "off", "unsupported"}

// Config configures the service. Zero values mean the defaults on each field.
type Config struct {
	// Routes are the routes this process polls.
	Routes map[string]*route.Route
	// Options size the streams (see events.Options).
	Options events.Options
	// Sweep is how often the consumers' orphans are looked for (default
	// consume.DefaultSweep).
	Sweep time.Duration
	// Logger receives the service's log lines (default: none).
	Logger zerolog.Logger
	// Metrics observe the service.
	Metrics Metrics
	// Learned returns the learned durations (nil: none are learned).
	Learned route.Learned
	// ModelRoutes are the model routes, whose jobs may be hedged (see
	// hedge.go).
	ModelRoutes map[string]*route.ModelRoute
	// Queue, when set, is told how far a queued job moved between two
	// polls (learn.Stats.ObserveQueue), and QueueRate how fast a route's
	// queue moves (learn.Stats.QueueRate).
	Queue     func(route string, moved float64, elapsed time.Duration)
	QueueRate func(route string) float64
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Seed seeds the jitter (default: random).
	Seed uint64
}

// Service is a running poller.
type Service struct {
	cfg    Config
	js     jetstream.JetStream
	res    *events.Resources
	jobs   jobs.Polls
	pauses *route.Pauses
	ns     events.Namespace
	log    zerolog.Logger
	rnd    *rand.Rand

	// failingSince is when this process's current run of its own failures
	// (NATS, KV) began, in Unix nanoseconds; 0 while they succeed.
	failingSince atomic.Int64

	// dues are the due times of the checks this process sent back.
	dues dues

	// gates are the process's gates to the providers; gate is each
	// route's, opened by Run (its status budgets at every level).
	gates *route.Gates
	gate  map[string]*route.Gate
}

// New validates the configuration and prepares the service, which calls
// the providers through the process's gates.
func New(cfg Config, js jetstream.JetStream, ns events.Namespace, res *events.Resources, owner jobs.Polls, gates *route.Gates) (*Service, error) {
	if len(cfg.Routes) == 0 {
		return nil, errors.New("poller: Routes: at least one route is required")
	}
	if gates == nil {
		return nil, errors.New("poller: the process's gates are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{
		cfg: cfg, js: js, res: res, jobs: owner, gates: gates, pauses: gates.Pauses(), ns: ns, log: cfg.Logger,
		rnd: schedule.NewRand(cfg.Seed),
	}, nil
}

// Run polls every route until ctx ends. Everything is set up before any
// route starts: a setup that fails returns with nothing left running (one
// that ctx ends is a stop, returning nil).
func (s *Service) Run(ctx context.Context) error {
	s.gate = map[string]*route.Gate{}
	consumers := map[string][]jetstream.Consumer{}
	for _, r := range s.cfg.Routes {
		sctx, cancel := context.WithTimeout(ctx, startupTimeout)
		g, err := s.gates.Open(sctx, r)
		if err == nil {
			s.gate[r.Name] = g
			consumers[r.Name], err = s.repartition(sctx, r)
		}
		cancel()
		if err != nil && ctx.Err() != nil {
			return nil // stopped while setting up: a stop, not a failure
		}
		if err != nil {
			return err
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	for _, r := range s.cfg.Routes {
		g.Go(func() error { return s.runRoute(ctx, r, consumers[r.Name]) })
	}
	s.log.Info().Int(logkey.Routes, len(s.cfg.Routes)).Msg("poller running")
	return g.Wait()
}

// The bounds of retryDelay.
var retryBackoff = struct{ min, max time.Duration }{250 * time.Millisecond, 30 * time.Second}

// retryDelay spaces out retries of our own failures (NATS, KV). A check is
// delivered once per poll, so its delivery count says nothing about how
// long a failure has lasted (a job on its tenth poll would wait half a
// minute after a one-second blip); the process's run of failures does:
// each retry waits about as long as the run has lasted, from 250 ms up to
// 30 s, so a short outage costs a short delay and a long one few retries.
func (s *Service) retryDelay() time.Duration {
	now := s.cfg.Now().UnixNano()
	s.failingSince.CompareAndSwap(0, now)
	d := time.Duration(now - s.failingSince.Load())
	return schedule.Jitter(min(max(d, retryBackoff.min), retryBackoff.max), schedule.RetryJitter, s.rnd)
}

// succeeded ends a run of failures. It is on the hot path: a load, and a
// store only when a run ends.
func (s *Service) succeeded() {
	if s.failingSince.Load() != 0 {
		s.failingSince.Store(0)
	}
}

const (
	// unsubmittedWait is how long a check of a job not yet submitted
	// waits before it looks again.
	unsubmittedWait = 5 * time.Second
	// refusedLimit is how many status calls in a row the provider must
	// refuse as invalid (400/422) before the job fails with its reason:
	// one refusal is confirmed by the next before the job ends.
	refusedLimit = 2
)

// check handles one delivery of a job's check message.
func (s *Service) check(ctx context.Context, r *route.Route, msg jetstream.Msg) events.Outcome {
	now := s.cfg.Now()
	d, err := s.jobs.Open(ctx, msg)
	switch {
	case errors.Is(err, jobs.ErrBadCheck):
		s.log.Error().Err(err).Str(logkey.Subject, msg.Subject()).Msg("dropping an unusable check message")
		return events.Stop()
	case err != nil:
		s.log.Warn().Err(err).Str(logkey.Subject, msg.Subject()).Msg("reading the job failed; retrying")
		return events.Later(s.retryDelay())
	}
	switch {
	case d.Ended():
		out, err := s.jobs.Settle(ctx, d)
		if err != nil {
			s.jobLog(r, d).Warn().Err(err).Msg("settling the finished job's check failed; retrying")
			return events.Later(s.retryDelay())
		}
		return out
	case d.Unsubmitted():
		return events.Later(schedule.Jitter(unsubmittedWait, schedule.RetryJitter, s.rnd))
	case d.N <= 1 && d.Check.Poll != nil:
		return s.arm(ctx, r, d, now)
	}
	if wait := d.Wait(now); wait > 0 {
		return events.Later(wait)
	}
	last, known := s.dues.take(d.Seq(), d.N)
	s.observeDue(r, d, last, known, now)
	if wait := s.pauses.Hold(r); wait > 0 {
		return s.jobs.Postpone(ctx, d, now.Add(wait))
	}
	prev := last.polled
	if !known && d.N > 2 {
		// Polled last by another process: about one interval ago.
		prev = now.Add(-r.NextPoll(d.Live, now, route.Hints{}, s.cfg.Learned, noJitter))
	}
	return s.poll(ctx, r, d, prev)
}

// jobLog is the logger of a line about d's job. It is made only for a
// line to be written: a quiet poll logs nothing and allocates no logger.
func (s *Service) jobLog(r *route.Route, d *jobs.Delivery) *zerolog.Logger {
	l := s.log.With().Str(logkey.JobID, d.JobID).Str(logkey.Route, r.Name).Uint64(logkey.Attempt, d.N).Logger()
	return &l
}

// arm handles a check's first delivery: it waits until the check's first
// poll is due, parked when that is far away (jobs.Polls.Wait).
func (s *Service) arm(ctx context.Context, r *route.Route, d *jobs.Delivery, now time.Time) events.Outcome {
	wait := d.Check.Due.Sub(now)
	if -wait > r.Policy.Longest() {
		// Delivered for the first time long after it was due: a new
		// consumer (the route was repartitioned) hands over every
		// waiting check at once. Spread them over one poll interval
		// instead of polling every job now.
		wait = schedule.Spread(r.Policy.Longest(), s.rnd)
	}
	wait = max(wait, 0)
	out := s.jobs.Wait(ctx, d, now.Add(wait), wait)
	if out.IsLater() {
		s.dues.put(d.Seq(), d.N, time.Time{}, now.Add(out.Delay()))
	}
	return out
}

// observeDue records how late the delivery came (last is what this
// process knows of it, when known), and the job's age.
func (s *Service) observeDue(r *route.Route, d *jobs.Delivery, last due, known bool, now time.Time) {
	if s.cfg.Metrics.Lateness != nil {
		if known {
			s.cfg.Metrics.Lateness(r.Name, now.Sub(last.due))
		} else if due, ok := d.Due(); ok && now.Sub(due) <= r.Policy.Longest() {
			// Due at its due time, unless that was long ago (spread).
			s.cfg.Metrics.Lateness(r.Name, now.Sub(due))
		}
	}
	if s.cfg.Metrics.Age != nil {
		s.cfg.Metrics.Age(r.Name, now.Sub(d.CreatedAt()))
	}
}

// poll makes one status call and hands its outcome, with what follows
// from it, to the jobs' owner.
// prev is when the job was polled before, as well as this process knows.
func (s *Service) poll(ctx context.Context, r *route.Route, d *jobs.Delivery, prev time.Time) events.Outcome {
	var hs hedgeSettle
	if d.Live.HedgedBy != "" || d.Live.HedgeOf != "" {
		// A hedge's other job is read first: it may have settled this one.
		hs = s.settleHedges(ctx, r, &hedgeView{id: d.JobID, live: d.Live}, s.jobLog(r, d))
	}
	ctx, span := s.pollSpan(ctx, r, d)
	st, callErr := s.gate[r.Name].Call(ctx, route.Call{Op: route.OpStatus,
		Ref: provider.Ref{ID: d.Live.RemoteID, Model: d.Live.Model, Data: d.Live.Ref}})
	var held *route.HeldError
	if errors.As(callErr, &held) {
		// The route is paused, or its budget is in use across the fleet:
		// no poll was made; come back then.
		heldPoll(span, held)
		return s.jobs.Postpone(ctx, d, s.cfg.Now().Add(held.Wait))
	}
	var pause time.Duration
	if callErr != nil {
		pause, _ = s.gate[r.Name].Hold() // the pause the answer caused, if any
	}

	now := s.cfg.Now().UTC()
	if callErr == nil {
		s.observeQueue(r, d.Live, st, prev, now)
	}
	f := d.Fold(jobs.Call{At: now, Status: st, Err: callErr, Prev: prev})
	dec := s.decide(r, d.JobID, f, st, pause, hs, now)
	res, err := s.jobs.Polled(ctx, d, f, dec)
	if err != nil {
		endPoll(span, &f, &dec, nil, now)
		s.jobLog(r, d).Warn().Err(err).Msg("recording the poll failed; retrying")
		return events.Later(s.retryDelay())
	}
	endPoll(span, &f, &dec, &res, now)
	s.succeeded()
	if res.Outcome.IsLater() {
		s.dues.put(d.Seq(), d.N, now, dec.Due)
	}
	if dec.HedgeBy != "" && res.Job != nil && res.Job.Routing != nil && res.Job.Routing.HedgedBy == dec.HedgeBy {
		s.submitHedge(ctx, d.JobID, s.jobLog(r, d))
	}
	if res.Finished {
		j := res.Job
		log := s.jobLog(r, d)
		log.Info().Str(logkey.State, string(j.State)).Int(logkey.Polls, j.Polls).Str(logkey.DetectedBy, string(j.DetectedBy)).Msg("job finished")
		switch {
		case j.State == state.Expired && j.DetectedBy == state.FromPollux:
			// Expired by its deadline here (not canceled by the provider
			// at it): the provider is asked to stop the work, where the
			// route wants it and the adapter can.
			outcome := "off"
			if r.CancelOnDeadline {
				outcome = s.cancelAtProvider(ctx, r, j, "the expired job", *log)
			}
			if s.cfg.Metrics.DeadlineCancel != nil {
				s.cfg.Metrics.DeadlineCancel(r.Name, outcome)
			}
		case j.DetectedBy == state.FromHedge:
			// Its hedge won: the work here is the loser's.
			s.cancelAtProvider(ctx, r, j, "the job its hedge beat", *log)
		}
	}
	return res.Outcome
}

// observeQueue tells the fleet's queue velocity how far a queued job moved
// since the poll before: its place is the check's — a poll that moved it
// would have replaced the check — until this answer, which gives its new
// place, or none once it left the queue (it moved all the way). The poll
// before is prev, as this process knows it, else the check's last poll (a
// replaced check's first delivery), so no interval counts twice.
func (s *Service) observeQueue(r *route.Route, live *events.PollState, st provider.Status, prev, now time.Time) {
	if live.LastPolledAt.After(prev) {
		prev = live.LastPolledAt
	}
	if s.cfg.Queue == nil || live.QueuePosition == nil || prev.IsZero() || !now.After(prev) {
		return
	}
	was := *live.QueuePosition
	switch {
	case st.State == state.Queued && st.QueuePosition != nil && *st.QueuePosition <= was:
		s.cfg.Queue(r.Name, float64(was-*st.QueuePosition), now.Sub(prev))
	case st.State == state.Running || st.State.Terminal():
		s.cfg.Queue(r.Name, float64(was), now.Sub(prev))
	}
}

// decide is what follows from a poll: the job's end, or its next poll
// (and, for a job a model route routed, whether to hedge it).
func (s *Service) decide(r *route.Route, id string, f jobs.Fold, st provider.Status, pause time.Duration, hs hedgeSettle, now time.Time) jobs.Decision {
	after := &f.After
	var dec jobs.Decision
	switch {
	case after.State.Terminal():
		return dec
	case hs.won != nil:
		dec.End = adopt(hs.won, now)
		return dec
	case f.Err != nil && after.NotFound >= r.NotFoundLimit:
		dec.End = &state.Observation{State: state.Lost, Source: state.FromPollux, At: now,
			Reason: "the provider answered \"unknown job\" to " + strconv.Itoa(after.NotFound) +
				" consecutive checks; Pollux does not resubmit on its own"}
		return dec
	case f.Err != nil && provider.ClassOf(f.Err) == provider.Invalid && after.Refused >= refusedLimit:
		dec.End = &state.Observation{State: state.Failed, Source: state.FromPoll, At: now,
			Reason: "the provider refused the job's status call " + strconv.Itoa(after.Refused) + " times: " + provider.MessageOf(f.Err)}
		return dec
	case !after.Deadline.IsZero() && !now.Before(after.Deadline):
		reason := "deadline " + after.Deadline.Format(time.RFC3339) + " passed"
		if after.Raw != "" {
			reason += "; the provider last said " + after.Raw
		}
		dec.End = &state.Observation{State: state.Expired, Reason: reason, Source: state.FromPollux, At: now}
		return dec
	}
	if pause > 0 {
		dec.Due = now.Add(pause)
		return dec
	}
	var hints route.Hints
	if f.Err == nil {
		hints = route.HintsOf(st)
	}
	if after.QueuePosition != nil && s.cfg.QueueRate != nil {
		hints.QueueRate = s.cfg.QueueRate(r.Name)
	}
	dec.Due = now.Add(r.NextPoll(after, now, hints, s.cfg.Learned, s.rnd))
	if m, ok := s.hedgeTo(r, id, after, now); ok {
		dec.HedgeBy, dec.HedgeTo = hedgeID(id), m.Route.Name
	}
	return dec
}

// noJitter is a random source whose every draw is the middle of its range,
// so the schedule's jitter factor is 1.
var noJitter = rand.New(middle{})

type middle struct{}

func (middle) Uint64() uint64 { return 1 << 63 }

// cancelAtProvider asks the provider to stop work on a job that is final
// for Pollux (what names it in log lines), where the adapter can, and
// returns the outcome (one of DeadlineOutcomes). Best effort: the job is
// final whatever the answer. Never while the route is paused.
func (s *Service) cancelAtProvider(ctx context.Context, r *route.Route, j *state.Job, what string, log zerolog.Logger) string {
	if !r.Adapter.Info().Cancel {
		return "unsupported"
	}
	_, err := s.gate[r.Name].Call(ctx, route.Call{Op: route.OpCancel, Ref: provider.JobRef(j), Job: j, Log: &log})
	var held *route.HeldError
	switch {
	case errors.As(err, &held) && held.Why == route.HeldBusy:
		log.Warn().Err(held.Err).Msg("no budget to cancel " + what + " at the provider")
		return "held"
	case errors.As(err, &held):
		log.Info().Msg("the route is paused: " + what + " is not canceled at the provider")
		return "held"
	case err != nil:
		log.Warn().Err(err).Msg("canceling " + what + " at the provider failed")
		return "failed"
	}
	return "canceled"
}
