// Package poller is cmd/poller's service: it consumes the check messages of
// every configured route (one durable consumer per route and partition;
// any number of processes share them), polls the provider when a job's
// check comes due, and sends the check back with NakWithDelay set to the
// next delay pkg/schedule computes — or ends it (Term) once the job is
// terminal.
//
// A check carries the job's poll context (events.Check): what a poll needs
// from the record, as of the job's latest change. Its first delivery only
// arms it (it waits out NotBefore); every later delivery is one status
// call. A quiet poll — the provider says what the context says — touches no
// KV at all: the polls since the context was written are the check's
// delivery count, so the schedule's counters need no write. A poll that
// learns something (a new state, progress, an error, the deadline) writes
// the record with compare-and-set, publishes its events, and replaces the
// check with one carrying the new context in one atomic publish. Every
// verifyEvery quiet polls the record is read, in case the job ended
// without its check being removed. A check without a context (armed by
// hand) reads the record at every delivery until its first poll replaces
// it.
//
// Rate limits pause the whole route, authentication failures pause it with
// a growing backoff (jobs are not failed), transient errors back off
// exponentially, and an "unknown job" answer is reconciled: after
// NotFoundLimit consecutive answers the job is lost — never resubmitted. At
// the deadline the last status call is made and a job still unfinished
// expires (and is canceled at the provider).
package poller

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/budget"
	"github.com/pollux-dev/pollux/internal/lifecycle"
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
	// StatusCall observes a status call by route and result class ("ok" or
	// a provider error class).
	StatusCall func(route, class string, d time.Duration)
	// Lateness observes how late a check was delivered against its due time.
	Lateness func(route string, d time.Duration)
	// Age observes an unfinished job's age when its check comes due.
	Age func(route string, d time.Duration)
	// Paused observes a route pause started by this process.
	Paused func(route, kind string, d time.Duration)
	// Orphans counts checks removed although acknowledged
	// (consume.SweepOrphans).
	Orphans func(n int)
}

// Config configures the service. Zero values mean the defaults on each field.
type Config struct {
	// Routes are the routes this process polls.
	Routes map[string]*route.Route
	// Options size the streams (see events.Options).
	Options events.Options
	// CallTimeout bounds one status or cancel call (default 20s).
	CallTimeout time.Duration
	// Logger receives the service's log lines (default: none).
	Logger zerolog.Logger
	// Metrics observe the service.
	Metrics Metrics
	// Learned returns the learned durations (nil: none are learned).
	Learned Learned
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
	life   *lifecycle.Lifecycle
	pauses *route.Pauses
	ns     events.Namespace
	log    zerolog.Logger

	rndMu sync.Mutex
	rnd   *rand.Rand
	// failingSince is when this process's current run of its own failures
	// (NATS, KV) began, in Unix nanoseconds; 0 while they succeed.
	failingSince atomic.Int64

	// dues are the due times of the checks this process sent back.
	dues dues

	// budgets are the routes' status budgets (nil: unlimited), set up by Run.
	budgets map[string]*budget.Budget
}

// New validates the configuration and prepares the service.
func New(cfg Config, js jetstream.JetStream, ns events.Namespace, res *events.Resources, life *lifecycle.Lifecycle, pauses *route.Pauses) (*Service, error) {
	if len(cfg.Routes) == 0 {
		return nil, errors.New("poller: Routes: at least one route is required")
	}
	cfg.CallTimeout = cmp.Or(cfg.CallTimeout, 20*time.Second)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	return &Service{
		cfg: cfg, js: js, res: res, life: life, pauses: pauses, ns: ns, log: cfg.Logger,
		rnd: rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d)),
	}, nil
}

// Run polls every route until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	s.budgets = map[string]*budget.Budget{}
	for _, r := range s.cfg.Routes {
		sctx, cancel := context.WithTimeout(ctx, startupTimeout)
		b, err := budget.Ensure(sctx, s.js, s.ns, s.res.Slots, r.Name, events.SlotStatus, r.StatusBudget, s.cfg.Options)
		cancel()
		if err != nil {
			return err
		}
		s.budgets[r.Name] = b
	}
	g, ctx := errgroup.WithContext(ctx)
	for _, r := range s.cfg.Routes {
		sctx, cancel := context.WithTimeout(ctx, startupTimeout)
		cs, err := s.repartition(sctx, r)
		cancel()
		if err != nil {
			return err
		}
		g.Go(func() error { return s.runRoute(ctx, r, cs) })
	}
	s.log.Info().Int("routes", len(s.cfg.Routes)).Msg("poller running")
	err := g.Wait()
	for _, b := range s.budgets {
		b.Close() // leases kept for reuse go back to the fleet now
	}
	return err
}

func (s *Service) remaining(route string) time.Duration {
	s.rndMu.Lock()
	defer s.rndMu.Unlock()
	return s.pauses.Remaining(route, s.rnd)
}

func (s *Service) next(p schedule.Policy, j schedule.Job) time.Duration {
	s.rndMu.Lock()
	defer s.rndMu.Unlock()
	return p.Next(j, s.rnd)
}

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
	return s.jittered(min(max(d, retryMin), retryMax))
}

// The bounds of retryDelay.
const (
	retryMin = 250 * time.Millisecond
	retryMax = 30 * time.Second
)

// jittered is d ± 20%.
func (s *Service) jittered(d time.Duration) time.Duration {
	s.rndMu.Lock()
	defer s.rndMu.Unlock()
	return time.Duration(float64(d) * (0.8 + 0.4*s.rnd.Float64()))
}

const (
	// unsubmittedWait is how long a check of a job not yet submitted
	// waits before it looks again.
	unsubmittedWait = 5 * time.Second
	// budgetBusyWait is how long a check waits when the route's status
	// budget has no lease free across the fleet.
	budgetBusyWait = 250 * time.Millisecond
)

// succeeded ends a run of failures. It is on the hot path: a load, and a
// store only when a run ends.
func (s *Service) succeeded() {
	if s.failingSince.Load() != 0 {
		s.failingSince.Store(0)
	}
}

// check handles one delivery of a job's check message.
func (s *Service) check(ctx context.Context, r *route.Route, msg jetstream.Msg) events.Outcome {
	now := s.cfg.Now()
	_, id, err := s.ns.ParseCheck(msg.Subject())
	if err != nil {
		s.log.Error().Err(err).Msg("dropping a check on an unexpected subject")
		return events.Stop()
	}
	md, err := msg.Metadata()
	if err != nil {
		return events.Stop()
	}
	log := s.log.With().Str("job_id", id).Str("route", r.Name).Uint64("attempt", md.NumDelivered).Logger()
	chk, err := events.DecodeCheck(msg.Data())
	if err != nil {
		log.Error().Err(err).Msg("dropping an unreadable check message")
		return events.Stop()
	}
	if chk.Job != nil {
		return s.checkContext(ctx, r, chk, md, log, now)
	}
	return s.checkRecord(ctx, r, id, chk, md.Sequence.Stream, log, now)
}

// checkContext handles a delivery of a check carrying the job's poll
// context (see events.Check): no KV read. The first delivery of a check
// only arms it; each later one is a poll, all of them quiet (a poll that
// learns something replaces the check), so the delivery count says how
// many polls the job has had since its context was written.
func (s *Service) checkContext(ctx context.Context, r *route.Route, chk *events.Check, md *jetstream.MsgMetadata, log zerolog.Logger, now time.Time) events.Outcome {
	seq := md.Sequence.Stream
	if md.NumDelivered <= 1 {
		wait := chk.NotBefore.Sub(now)
		if -wait > r.Policy.Longest() {
			// Delivered for the first time long after it was due: a new
			// consumer (the route was repartitioned) hands over every
			// waiting check at once. Spread them over one poll interval
			// instead of polling every job now.
			wait = s.spread(r.Policy.Longest())
		}
		wait = max(wait, 0)
		s.dues.put(seq, md.NumDelivered, time.Time{}, now.Add(wait))
		return events.Later(wait)
	}
	if chk.Job.State.Terminal() {
		return events.Stop() // Pollux never arms a finished job; a hand-made check
	}
	j := *chk.Job
	j.Route = r.Name
	quiet := int(md.NumDelivered - 2) // polls made on this check so far
	j.Polls += quiet
	j.Unchanged += quiet
	last, known := s.dues.take(seq, md.NumDelivered)
	switch {
	case known:
		if s.cfg.Metrics.Lateness != nil {
			s.cfg.Metrics.Lateness(r.Name, now.Sub(last.due))
		}
		if quiet > 0 {
			j.LastPolledAt = last.polled
		}
	case quiet == 0:
		// Due at its not-before, unless that was long ago (spread).
		if s.cfg.Metrics.Lateness != nil && !chk.NotBefore.IsZero() && now.Sub(chk.NotBefore) <= r.Policy.Longest() {
			s.cfg.Metrics.Lateness(r.Name, now.Sub(chk.NotBefore))
		}
	default:
		// Polled by another process: the previous poll was about one
		// interval ago.
		j.LastPolledAt = now.Add(-s.typicalDelay(r, &j, now))
	}
	if s.cfg.Metrics.Age != nil {
		s.cfg.Metrics.Age(r.Name, now.Sub(j.CreatedAt))
	}
	if quiet > 0 && quiet%verifyEvery == 0 {
		if out, stop := s.verify(ctx, j.ID, log); stop {
			return out
		}
	}
	held := heldCheck{seq: seq, delivered: md.NumDelivered, context: true}
	if d := s.remaining(r.Name); d > 0 {
		return s.postpone(ctx, &j, held, d, log)
	}
	return s.poll(ctx, r, &j, held, log)
}

// verifyEvery is how many quiet polls a check makes between two reads of
// the job record (see verify).
const verifyEvery = 32

// verify reads the job record and says whether the check must end: the job
// became terminal without its check being removed (the provider reports
// a state other than Pollux's, or removing the check raced with replacing
// it), or the record is gone. A safety net: every such write also removes
// the check, and otherwise the provider's next answer would stop it.
func (s *Service) verify(ctx context.Context, id string, log zerolog.Logger) (events.Outcome, bool) {
	j, _, err := s.life.Store().Get(ctx, id)
	switch {
	case errors.Is(err, state.ErrNotFound):
		log.Warn().Msg("check for a job that does not exist; dropped")
		return events.Stop(), true
	case err != nil:
		return events.Outcome{}, false // the poll goes on; the next verify reads again
	case j.State.Terminal():
		return events.Stop(), true
	}
	return events.Outcome{}, false
}

// checkRecord handles a delivery of a check without a poll context (armed
// by hand or by an older Pollux): it reads the job record every time, and
// its first poll replaces it with a check that carries the context.
func (s *Service) checkRecord(ctx context.Context, r *route.Route, id string, chk *events.Check, seq uint64, log zerolog.Logger, now time.Time) events.Outcome {
	if wait := chk.NotBefore.Sub(now); wait > 0 {
		return events.Later(wait)
	}
	j, rev, err := s.life.Store().Get(ctx, id)
	switch {
	case errors.Is(err, state.ErrNotFound):
		log.Warn().Msg("check for a job that does not exist; dropped")
		return events.Stop()
	case err != nil:
		log.Warn().Err(err).Msg("reading the job failed; retrying")
		return events.Later(s.retryDelay())
	}
	s.succeeded()
	log = log.With().Str("remote_id", j.RemoteID).Logger()
	if len(j.Outbox) > 0 {
		if err := s.life.FlushAt(ctx, j, rev); err != nil {
			log.Warn().Err(err).Msg("publishing pending events failed; retrying")
			return events.Later(s.retryDelay())
		}
	}
	if j.State.Terminal() {
		return events.Stop()
	}
	if j.RemoteID == "" {
		// Not submitted yet (ingest arms only after submitting, so this is
		// a hand-made message): look again later.
		return events.Later(s.jittered(unsubmittedWait))
	}
	if wait := j.NextCheckAt.Sub(now); wait > 10*time.Millisecond {
		return events.Later(wait)
	}
	if s.cfg.Metrics.Lateness != nil && !j.NextCheckAt.IsZero() {
		s.cfg.Metrics.Lateness(r.Name, now.Sub(j.NextCheckAt))
	}
	if s.cfg.Metrics.Age != nil {
		s.cfg.Metrics.Age(r.Name, now.Sub(j.CreatedAt))
	}
	if d := s.remaining(r.Name); d > 0 {
		return events.Later(d)
	}
	return s.poll(ctx, r, j, heldCheck{seq: seq, rev: rev}, log)
}

// heldCheck is the check message a poll holds: its stream sequence, and
// where the job came from (the check's poll context, or the record read at
// revision rev).
type heldCheck struct {
	seq       uint64
	delivered uint64 // its delivery count
	context   bool
	rev       uint64
}

// postpone sends a check back for d without polling. A check with a poll
// context is replaced by one carrying the polls counted so far, since its
// delivery count would count this delivery as a poll.
func (s *Service) postpone(ctx context.Context, j *state.Job, h heldCheck, d time.Duration, log zerolog.Logger) events.Outcome {
	if !h.context {
		return events.Later(d)
	}
	switch err := s.life.Replace(ctx, j, h.seq, s.cfg.Now().Add(d)); {
	case err == nil, errors.Is(err, lifecycle.ErrCheckMoved):
		return events.Stop()
	default:
		log.Warn().Err(err).Msg("postponing the check failed; it will count one poll too many")
		return events.Later(d)
	}
}

// poll makes one status call and applies its result to the job.
func (s *Service) poll(ctx context.Context, r *route.Route, j *state.Job, h heldCheck, log zerolog.Logger) events.Outcome {
	lease, err := s.budgets[r.Name].Acquire(ctx)
	if err != nil {
		// The route's budget is in use across the fleet: come back soon.
		if s.cfg.Metrics.StatusCall != nil {
			s.cfg.Metrics.StatusCall(r.Name, "budget_busy", 0)
		}
		return s.postpone(ctx, j, h, s.jittered(budgetBusyWait), log)
	}
	if d := s.remaining(r.Name); d > 0 {
		lease.Release() // paused while we waited for the lease
		return s.postpone(ctx, j, h, d, log)
	}
	cctx, cancel := context.WithTimeout(ctx, cmp.Or(r.CallTimeout, s.cfg.CallTimeout))
	start := time.Now()
	st, callErr := r.Adapter.Status(cctx, provider.JobRef(j))
	cancel()
	lease.Release()
	elapsed := time.Since(start)
	class := "ok"
	if callErr != nil {
		class = provider.ClassOf(callErr).String()
	}
	if s.cfg.Metrics.StatusCall != nil {
		s.cfg.Metrics.StatusCall(r.Name, class, elapsed)
	}
	pauseFor := s.pauseAfter(ctx, r, callErr, log)

	now := s.cfg.Now().UTC()
	res := pollResult{st: st, err: callErr, pauseFor: pauseFor, now: now}
	if h.context {
		// Most polls learn nothing: nothing to write, the check goes back.
		cp := *j
		if s.fold(r, &cp, res) {
			s.dues.put(h.seq, h.delivered, now, cp.NextCheckAt)
			return events.Later(cp.NextCheckAt.Sub(s.cfg.Now()))
		}
	}
	expired := false
	update := func(cur *state.Job) error {
		if cur.State.Terminal() {
			return state.ErrNoChange
		}
		if h.context {
			// The record's counters stop at the context's last write; the
			// polls since are counted by the check's deliveries.
			cur.Polls = max(cur.Polls, j.Polls)
			cur.Unchanged = max(cur.Unchanged, j.Unchanged)
			cur.LastPolledAt = latest(cur.LastPolledAt, j.LastPolledAt)
		}
		s.fold(r, cur, res)
		// Expired by its deadline here (not canceled by the provider at
		// it): the provider is asked to stop the work.
		expired = cur.State == state.Expired && cur.DetectedBy == state.FromPollux
		return nil
	}
	if h.context {
		j, err = s.life.Update(ctx, j.ID, update)
	} else {
		j, err = s.life.UpdateFrom(ctx, j, h.rev, update)
	}
	switch {
	case errors.Is(err, state.ErrNotFound):
		log.Warn().Msg("the job's record is gone; its check is dropped")
		return events.Stop()
	case err != nil:
		log.Warn().Err(err).Msg("recording the poll failed; retrying")
		return events.Later(s.retryDelay())
	}
	s.succeeded()
	if j.State.Terminal() {
		log.Info().Str("state", string(j.State)).Int("polls", j.Polls).Str("detected_by", string(j.DetectedBy)).Msg("job finished")
		if expired && r.Adapter.Info().Cancel {
			s.cancelExpired(ctx, r, j, log)
		}
		return events.Stop()
	}
	// The check goes on with the new context.
	switch err := s.life.Replace(ctx, j, h.seq, j.NextCheckAt); {
	case err == nil, errors.Is(err, lifecycle.ErrCheckMoved):
		return events.Stop()
	default:
		// The old check stays; its next delivery finds its context stale
		// and writes again.
		log.Warn().Err(err).Msg("replacing the check failed; keeping the old one")
		return events.Later(j.NextCheckAt.Sub(s.cfg.Now()))
	}
}

// pollResult is what one status call returned, and when.
type pollResult struct {
	st       provider.Status
	err      error
	pauseFor time.Duration // the route pause the call caused
	now      time.Time
}

// pauseAfter pauses the route after a rate limit or an authentication
// failure, and returns the pause (0: none).
func (s *Service) pauseAfter(ctx context.Context, r *route.Route, callErr error, log zerolog.Logger) time.Duration {
	if callErr == nil {
		if err := s.pauses.Recovered(ctx, r.Name); err != nil {
			log.Warn().Err(err).Msg("clearing the route's auth strikes failed")
		}
		return 0
	}
	var pauseFor time.Duration
	var pauseKind string
	switch provider.ClassOf(callErr) {
	case provider.RateLimited:
		pauseFor, pauseKind = cmp.Or(provider.RetryAfterOf(callErr), 5*time.Second), route.PauseRateLimit
		if _, err := s.pauses.RateLimited(ctx, r.Name, pauseFor, provider.MessageOf(callErr)); err != nil {
			log.Warn().Err(err).Msg("recording the route pause failed")
		}
		log.Warn().Dur("pause", pauseFor).Msg("rate limited; route paused")
	case provider.Auth:
		ps, err := s.pauses.AuthFailed(ctx, r.Name, provider.MessageOf(callErr))
		if err != nil {
			log.Warn().Err(err).Msg("recording the route pause failed")
		}
		pauseFor, pauseKind = time.Until(ps.Until), route.PauseAuth
		log.Error().Time("paused_until", ps.Until).Str("reason", provider.MessageOf(callErr)).
			Msg("AUTHENTICATION FAILED: check the route's token; route paused, jobs kept")
	}
	if pauseFor > 0 && s.cfg.Metrics.Paused != nil {
		s.cfg.Metrics.Paused(r.Name, pauseKind, pauseFor)
	}
	return pauseFor
}

// fold applies a poll's result to job j: counters, state, deadline and
// next check time. It reports whether the poll was quiet: a successful
// call that changed nothing but the counters, so nothing needs writing.
func (s *Service) fold(r *route.Route, j *state.Job, res pollResult) (quiet bool) {
	// What a quiet poll leaves as it was, besides the state.
	was, raw, started, submitted := j.State, j.ProviderStatus, j.StartedAt, j.SubmittedAt
	failing := j.Errors > 0 || j.NotFound > 0
	now := res.now
	prev := j.LastPolledAt
	j.Polls++
	j.LastPolledAt = now
	changed := s.apply(r, j, res.st, res.err, now, prev)
	if changed {
		j.Unchanged = 0
	} else if res.err == nil {
		j.Unchanged++
	}
	if !j.State.Terminal() && !j.Deadline.IsZero() && !now.Before(j.Deadline) {
		reason := "deadline " + j.Deadline.Format(time.RFC3339) + " passed"
		if j.ProviderStatus != "" {
			reason += "; the provider last said " + j.ProviderStatus
		}
		j.Apply(state.Observation{State: state.Expired, Reason: reason, Source: state.FromPollux, At: now})
	}
	if !j.State.Terminal() {
		j.NextCheckAt = now.Add(s.delay(r, j, res.st, res.err, res.pauseFor, now))
	}
	// Every event comes with a change or a new state, so a quiet poll has
	// none to publish.
	return res.err == nil && !changed && !failing && j.State == was && j.ProviderStatus == raw &&
		j.StartedAt.Equal(started) && j.SubmittedAt.Equal(submitted)
}

// typicalDelay is the interval, without jitter, that the previous poll of
// job j (whose counters it left as they are) put before this one: the best
// guess at when another process polled it last.
func (s *Service) typicalDelay(r *route.Route, j *state.Job, now time.Time) time.Duration {
	return r.Policy.Next(scheduleOf(j, s.cfg.Learned, now), noJitter)
}

// noJitter is a random source whose every draw is the middle of its range,
// so the schedule's jitter factor is 1.
var noJitter = rand.New(middle{})

type middle struct{}

func (middle) Uint64() uint64 { return 1 << 63 }

// spread is a uniformly random wait in [0, d).
func (s *Service) spread(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	s.rndMu.Lock()
	defer s.rndMu.Unlock()
	return time.Duration(s.rnd.Int64N(int64(d)))
}

// apply folds a status call's result into the job and reports whether the
// job changed. prev is the time of the previous poll.
func (s *Service) apply(r *route.Route, j *state.Job, st provider.Status, callErr error, now, prev time.Time) bool {
	if callErr == nil {
		j.Errors, j.NotFound, j.LastError = 0, 0, ""
		obs := st.Observation
		obs.Source, obs.At = state.FromPoll, now
		if obs.State.Terminal() && obs.CompletedAt.IsZero() {
			// The provider gives no completion time: it ended between the
			// last poll that saw it unfinished and this one.
			since := latest(prev, j.SubmittedAt, j.CreatedAt)
			obs.CompletedAt = since.Add(now.Sub(since) / 2)
		}
		return j.Apply(obs) != ""
	}
	j.LastError = provider.MessageOf(callErr)
	switch provider.ClassOf(callErr) {
	case provider.NotFound:
		j.NotFound++
		if j.NotFound >= r.NotFoundLimit {
			reason := "the provider answered \"unknown job\" to " + strconv.Itoa(j.NotFound) +
				" consecutive checks; Pollux does not resubmit on its own"
			return j.Apply(state.Observation{State: state.Lost, Reason: reason, Source: state.FromPollux, At: now}) != ""
		}
		j.Errors++
	case provider.RateLimited, provider.Auth:
		// The route pause paces these; they say nothing about the job.
	default:
		j.Errors++
	}
	return false
}

// delay computes the wait before the job's next check.
func (s *Service) delay(r *route.Route, j *state.Job, st provider.Status, callErr error, pauseFor time.Duration, now time.Time) time.Duration {
	if pauseFor > 0 {
		return pauseFor + s.remainingJitter(pauseFor)
	}
	sj := scheduleOf(j, s.cfg.Learned, now)
	if callErr == nil {
		sj.PollAfter = st.PollAfter
	}
	return s.next(r.Policy, sj)
}

func latest(ts ...time.Time) time.Time {
	var l time.Time
	for _, t := range ts {
		if t.After(l) {
			l = t
		}
	}
	return l
}

// Schedulable is the schedule's view of a job (without its phase and
// learned durations, which the caller adds).
func Schedulable(j *state.Job, now time.Time) schedule.Job {
	sj := schedule.Job{
		Now: now, Submitted: cmp.Or(j.SubmittedAt, j.CreatedAt), Polls: j.Polls,
		Unchanged: j.Unchanged, Expected: time.Duration(j.ExpectedDuration), Deadline: j.Deadline,
		WebhookExpected: j.WebhookExpected, Errors: j.Errors, StartedAt: j.StartedAt,
	}
	if j.Progress != nil {
		sj.Progress = *j.Progress
	}
	if j.QueuePosition != nil {
		sj.QueuePosition = *j.QueuePosition
	}
	return sj
}

func (s *Service) remainingJitter(d time.Duration) time.Duration {
	s.rndMu.Lock()
	defer s.rndMu.Unlock()
	spread := max(d/10, 100*time.Millisecond)
	return time.Duration(s.rnd.Int64N(int64(spread)))
}

// cancelExpired asks the provider to stop work on an expired job; best
// effort, as the job is already final for Pollux.
func (s *Service) cancelExpired(ctx context.Context, r *route.Route, j *state.Job, log zerolog.Logger) {
	lease, err := s.budgets[r.Name].Acquire(ctx)
	if err != nil {
		log.Warn().Err(err).Msg("no budget to cancel the expired job at the provider")
		return
	}
	defer lease.Release()
	cctx, cancel := context.WithTimeout(ctx, cmp.Or(r.CallTimeout, s.cfg.CallTimeout))
	defer cancel()
	if _, err := r.Adapter.Cancel(cctx, provider.JobRef(j)); err != nil {
		log.Warn().Err(err).Msg("canceling the expired job at the provider failed")
	}
}
