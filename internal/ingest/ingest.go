// Package ingest is cmd/ingest's service: it consumes the intake subjects of
// every configured route (one durable consumer per route, so a slow or
// paused route never holds up another), submits jobs to providers exactly
// once, starts tracking jobs submitted elsewhere, cancels jobs, and rejects
// bad requests with an event that names the problem. Intake on routes that
// no process serves is swept up and rejected too.
package ingest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/budget"
	"github.com/pollux-dev/pollux/internal/consume"
	"github.com/pollux-dev/pollux/internal/faultpoint"
	"github.com/pollux-dev/pollux/internal/lifecycle"
	"github.com/pollux-dev/pollux/internal/poller"
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
	// (submitted, tracked, canceled, duplicate, rejected, retry, lost, failed).
	Submission func(route, kind, outcome string)
	// ProviderCall observes a submit or cancel call by route, operation and
	// result class ("ok" or a provider error class).
	ProviderCall func(route, op, class string, d time.Duration)
	// Orphans counts intake messages removed although acknowledged
	// (consume.SweepOrphans).
	Orphans func(n int)
}

// Config configures the service. Zero values mean the defaults on each field.
type Config struct {
	// Routes are the routes this process serves.
	Routes map[string]*route.Route
	// Options size the streams (see events.Options).
	Options events.Options
	// SweepInterval is how often intake on unserved routes is looked for
	// (default 5s).
	SweepInterval time.Duration
	// CallTimeout bounds one provider call (default 30s).
	CallTimeout time.Duration
	// Logger receives the service's log lines (default: none).
	Logger zerolog.Logger
	// Metrics observe the service.
	Metrics Metrics
	// Learned returns the learned durations of a route, model and
	// configuration key (see package learn); nil means none are learned.
	Learned func(route, model, configKey string) (total, run *schedule.Dist)
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
	life   *lifecycle.Lifecycle
	pauses *route.Pauses
	ns     events.Namespace
	log    zerolog.Logger

	rndMu sync.Mutex
	rnd   *rand.Rand

	// submitBudgets and statusBudgets are the routes' budgets (nil:
	// unlimited), set up by Run; cancels use the status budget.
	submitBudgets, statusBudgets map[string]*budget.Budget
}

// New validates the configuration and prepares the service.
func New(cfg Config, js jetstream.JetStream, ns events.Namespace, res *events.Resources, life *lifecycle.Lifecycle, pauses *route.Pauses) (*Service, error) {
	if len(cfg.Routes) == 0 {
		return nil, errors.New("ingest: Routes: at least one route is required")
	}
	cfg.SweepInterval = cmp.Or(cfg.SweepInterval, 5*time.Second)
	cfg.CallTimeout = cmp.Or(cfg.CallTimeout, 30*time.Second)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	return &Service{
		cfg: cfg, js: js, res: res, life: life, pauses: pauses, ns: ns,
		log: cfg.Logger, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}, nil
}

// Run consumes every route's intake until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	s.submitBudgets, s.statusBudgets = map[string]*budget.Budget{}, map[string]*budget.Budget{}
	for _, r := range s.cfg.Routes {
		sctx, cancel := context.WithTimeout(ctx, startupTimeout)
		sub, err := budget.Ensure(sctx, s.js, s.ns, s.res.Slots, r.Name, events.SlotSubmit, r.SubmitBudget, s.cfg.Options)
		if err == nil {
			s.submitBudgets[r.Name] = sub
			s.statusBudgets[r.Name], err = budget.Ensure(sctx, s.js, s.ns, s.res.Slots, r.Name, events.SlotStatus, r.StatusBudget, s.cfg.Options)
		}
		cancel()
		if err != nil {
			return err
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	for _, r := range s.cfg.Routes {
		ensure := func(ctx context.Context) (jetstream.Consumer, error) {
			sctx, cancel := context.WithTimeout(ctx, startupTimeout)
			defer cancel()
			return events.EnsureConsumer(sctx, s.res.Intake, s.ns.IngestConsumerConfig(r.Name, s.cfg.Options))
		}
		c, err := ensure(ctx)
		if err != nil {
			return err
		}
		g.Go(func() error {
			return consume.Recreate(ctx, c, ensure, consume.Options{
				Workers: r.SubmitWorkers,
				Hold:    func() time.Duration { return s.holdFor(r.Name) },
				Stream:  s.res.Intake,
				Swept:   s.cfg.Metrics.Orphans,
				Logger:  s.log.With().Str("route", r.Name).Logger(),
			}, func(ctx context.Context, msg jetstream.Msg) events.Outcome {
				return s.handle(ctx, r, msg)
			})
		})
	}
	g.Go(func() error { return s.sweep(ctx) })
	s.log.Info().Int("routes", len(s.cfg.Routes)).Msg("ingest running")
	err := g.Wait()
	for _, bs := range []map[string]*budget.Budget{s.submitBudgets, s.statusBudgets} {
		for _, b := range bs {
			b.Close() // leases kept for reuse go back to the fleet now
		}
	}
	return err
}

func (s *Service) holdFor(route string) time.Duration {
	s.rndMu.Lock()
	defer s.rndMu.Unlock()
	return s.pauses.Remaining(route, s.rnd)
}

func (s *Service) jitter(d time.Duration) time.Duration {
	s.rndMu.Lock()
	defer s.rndMu.Unlock()
	return time.Duration(float64(d) * (0.8 + 0.4*s.rnd.Float64()))
}

// handle dispatches one intake message.
func (s *Service) handle(ctx context.Context, r *route.Route, msg jetstream.Msg) events.Outcome {
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
	in := intake{kind: kind, routeName: r.Name, route: r, msg: msg, seq: md.Sequence.Stream, stored: md.Timestamp, attempt: md.NumDelivered}
	var out events.Outcome
	var result string
	switch kind {
	case events.KindSubmit:
		out, result = s.submit(ctx, in)
	case events.KindTrack:
		out, result = s.track(ctx, in)
	default:
		out, result = s.cancel(ctx, in)
	}
	if s.cfg.Metrics.Submission != nil {
		s.cfg.Metrics.Submission(r.Name, kind, result)
	}
	return out
}

// intake is one intake message being handled.
type intake struct {
	kind      string
	routeName string
	route     *route.Route // nil on an unserved route
	msg       jetstream.Msg
	seq       uint64
	stored    time.Time
	attempt   uint64
}

func (in intake) logger(log zerolog.Logger, jobID string) zerolog.Logger {
	return log.With().Str("job_id", jobID).Str("route", in.routeName).
		Str("kind", in.kind).Uint64("intake_seq", in.seq).Uint64("attempt", in.attempt).Logger()
}

// reject publishes a rejected event naming the problem; the message ends.
func (s *Service) reject(ctx context.Context, in intake, jobID string, err error) (events.Outcome, string) {
	rj := events.Rejection{Kind: in.kind, Subject: in.msg.Subject(), IntakeSeq: in.seq, Error: err.Error()}
	var fe *events.FieldError
	if errors.As(err, &fe) {
		rj.Field = fe.Field
	}
	if perr := s.life.Reject(ctx, in.routeName, jobID, rj, s.cfg.Now()); perr != nil {
		s.log.Warn().Err(perr).Msg("publishing a rejection failed; retrying the message")
		return events.Later(2 * time.Second), "retry"
	}
	log := in.logger(s.log, jobID)
	log.Info().Str("problem", err.Error()).Msg("request rejected")
	return events.Stop(), "rejected"
}

// lenientID finds a usable job id in a message that failed validation, so
// the rejection lands on the job's subject when possible.
func lenientID(data []byte, fallback string) string {
	var m struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(data, &m) == nil && events.ValidToken(m.ID) {
		return m.ID
	}
	return fallback
}

// deadline resolves and checks a request's deadline against the route.
func (s *Service) deadline(r *route.Route, deadline time.Time, timeoutS float64, now time.Time) (time.Time, error) {
	d := events.ResolveDeadline(deadline, timeoutS, now)
	switch {
	case d.IsZero():
		return now.Add(r.Deadline).UTC(), nil
	case !d.After(now):
		return time.Time{}, &events.FieldError{Field: "deadline", Problem: fmt.Sprintf("%s is in the past", d.Format(time.RFC3339))}
	case d.Sub(now) > r.MaxDeadline:
		return time.Time{}, &events.FieldError{Field: "deadline", Problem: fmt.Sprintf("more than route %s's max_deadline (%s) away", r.Name, r.MaxDeadline)}
	}
	return d, nil
}

// firstCheck returns when a job's first status check is due.
func (s *Service) firstCheck(r *route.Route, j *state.Job, now time.Time) time.Time {
	s.rndMu.Lock()
	defer s.rndMu.Unlock()
	sj := schedule.Job{
		Now: now, Submitted: now, Phase: schedule.PhaseQueued, Expected: time.Duration(j.ExpectedDuration),
		Deadline: j.Deadline, WebhookExpected: j.WebhookExpected,
	}
	if s.cfg.Learned != nil {
		sj.Learned, sj.LearnedRun = s.cfg.Learned(j.Route, j.Model, j.ConfigKey)
	}
	d := r.Policy.Next(sj, s.rnd)
	return now.Add(d)
}

// submit handles a submission: dedupe, submit once, arm the check.
func (s *Service) submit(ctx context.Context, in intake) (events.Outcome, string) {
	now := s.cfg.Now().UTC()
	data := in.msg.Data()
	fallback := events.MessageID(in.seq, in.stored)
	m, err := events.DecodeSubmit(data)
	if err != nil {
		return s.reject(ctx, in, lenientID(data, fallback), err)
	}
	id := m.ID
	switch {
	case id != "":
	case m.IdempotencyKey != "":
		id = events.KeyID(in.route.Name, m.IdempotencyKey)
	default:
		id = fallback
	}
	deadline, err := s.deadline(in.route, m.Deadline, m.TimeoutS, now)
	if err != nil {
		return s.reject(ctx, in, id, err)
	}
	key := cmp.Or(m.IdempotencyKey, id)
	j := &state.Job{
		ID: id, Route: in.route.Name, Model: m.Model, ConfigKey: m.ConfigKey, State: state.Pending,
		Input: m.Input, Metadata: m.Metadata, IdempotencyKey: key, IntakeSeq: in.seq,
		CreatedAt: now, Deadline: deadline,
		ExpectedDuration: state.Duration(m.ExpectedDurationS * float64(time.Second)),
		WebhookExpected:  in.route.WebhookURL != "" && (m.Webhook == nil || *m.Webhook),
	}
	log := in.logger(s.log, id)

	_, err = s.life.Store().Create(ctx, j)
	if errors.Is(err, state.ErrExists) {
		cur, _, gerr := s.life.Store().Get(ctx, id)
		if gerr != nil {
			log.Warn().Err(gerr).Msg("reading the existing job failed; retrying")
			return events.Later(s.jitter(time.Second)), "retry"
		}
		switch {
		case cur.Route != in.route.Name:
			return s.reject(ctx, in, id, &events.FieldError{Field: "id", Problem: fmt.Sprintf("already used by a job on route %s", cur.Route)})
		case cur.IntakeSeq != in.seq:
			log.Debug().Uint64("owner_seq", cur.IntakeSeq).Msg("duplicate submission; the job exists")
			return events.Done(), "duplicate"
		}
		j = cur // our own message again: resume where the last attempt stopped
	} else if err != nil {
		log.Warn().Err(err).Msg("creating the job failed; retrying")
		return events.Later(s.jitter(time.Second)), "retry"
	}
	return s.advance(ctx, in, j, log)
}

// advance takes an accepted submission from wherever it stands to tracked.
func (s *Service) advance(ctx context.Context, in intake, j *state.Job, log zerolog.Logger) (events.Outcome, string) {
	r := in.route
	switch {
	case j.State.Terminal():
		if err := s.life.Flush(ctx, j); err != nil {
			return events.Later(s.jitter(time.Second)), "retry"
		}
		return events.Done(), "duplicate"
	case j.RemoteID != "":
		return s.arm(ctx, j, log, "submitted")
	case !j.CancelRequestedAt.IsZero():
		_, err := s.life.Update(ctx, j.ID, func(cur *state.Job) error {
			cur.Apply(state.Observation{State: state.Canceled, Reason: "canceled before it was submitted", Source: state.FromCancel, At: s.cfg.Now().UTC()})
			return nil
		})
		if err != nil {
			return events.Later(s.jitter(time.Second)), "retry"
		}
		return events.Done(), "canceled"
	case j.SubmitInDoubt && !r.Adapter.Info().Idempotent:
		reason := "the outcome of an interrupted submit call is unknown and route " + r.Name +
			"'s provider cannot deduplicate a retry, so Pollux did not resubmit; look for idempotency key " + j.IdempotencyKey + " at the provider"
		_, err := s.life.Update(ctx, j.ID, func(cur *state.Job) error {
			cur.Apply(state.Observation{State: state.Lost, Reason: reason, Source: state.FromPollux, At: s.cfg.Now().UTC()})
			return nil
		})
		if err != nil {
			return events.Later(s.jitter(time.Second)), "retry"
		}
		log.Error().Msg("submission in doubt after an interrupted call; marked lost rather than risk a duplicate")
		return events.Done(), "lost"
	}
	lease, err := s.submitBudgets[r.Name].Acquire(ctx)
	if err != nil {
		return events.Later(s.jitter(500 * time.Millisecond)), "retry" // the fleet's submit budget is in use
	}
	if d := s.holdFor(r.Name); d > 0 {
		lease.Release()
		return events.Later(d), "retry"
	}
	defer lease.Release()

	// Mark the attempt before making it: a crash from here on leaves the
	// outcome in doubt, and the next attempt must know.
	j, err = s.life.Update(ctx, j.ID, func(cur *state.Job) error {
		if cur.RemoteID != "" || cur.State.Terminal() {
			return state.ErrNoChange
		}
		cur.SubmitAttempts++
		cur.SubmitInDoubt = true
		return nil
	})
	if err != nil {
		log.Warn().Err(err).Msg("recording the submit attempt failed; retrying")
		return events.Later(s.jitter(time.Second)), "retry"
	}
	if j.RemoteID != "" || j.State.Terminal() {
		return s.advance(ctx, in, j, log)
	}

	cctx, cancel := context.WithTimeout(ctx, cmp.Or(r.CallTimeout, s.cfg.CallTimeout))
	start := time.Now()
	st, err := r.Adapter.Submit(cctx, provider.SubmitRequest{
		JobID: j.ID, Model: j.Model, Input: j.Input, IdempotencyKey: j.IdempotencyKey,
		Deadline: j.Deadline, WebhookURL: s.webhookURL(r, j),
	})
	cancel()
	s.observeCall(r.Name, "submit", err, time.Since(start))
	if err != nil {
		return s.submitFailed(ctx, in, j, err, log)
	}
	faultpoint.Hit("after-submit") // the provider has the job; the record does not know yet

	now := s.cfg.Now().UTC()
	j, err = s.life.Update(ctx, j.ID, func(cur *state.Job) error {
		if cur.RemoteID != "" {
			return state.ErrNoChange
		}
		cur.RemoteID = st.RemoteID
		if len(st.RefData) <= provider.MaxRefData {
			cur.ProviderRef = st.RefData
		}
		cur.SubmitInDoubt = false
		cur.Input = nil
		cur.SubmittedAt = cmp.Or(st.CreatedAt, now)
		cur.State, cur.ChangedAt = state.Queued, now
		cur.Record(events.EventSubmitted, now)
		obs := st.Observation
		obs.Source, obs.At = state.FromSubmit, now
		cur.Apply(obs)
		cur.NextCheckAt = s.firstCheck(r, cur, now)
		return nil
	})
	if err != nil {
		// The provider has the job but the record does not say so yet; the
		// retry finds the attempt in doubt.
		log.Error().Err(err).Str("remote_id", st.RemoteID).Msg("recording the remote id failed; retrying")
		return events.Later(s.jitter(time.Second)), "retry"
	}
	log.Info().Str("remote_id", j.RemoteID).Str("state", string(j.State)).Msg("submitted")
	if !j.CancelRequestedAt.IsZero() && !j.State.Terminal() {
		s.cancelRemote(ctx, r, j, log)
	}
	return s.arm(ctx, j, log, "submitted")
}

// submitFailed decides what a failed submit call means.
func (s *Service) submitFailed(ctx context.Context, in intake, j *state.Job, err error, log zerolog.Logger) (events.Outcome, string) {
	r := in.route
	class := provider.ClassOf(err)
	log = log.With().Str("error_class", class.String()).Logger()
	inDoubt := class == provider.Transient && !neverSent(err) && provider.RetryAfterOf(err) == 0 && httpStatus(err) == 0
	if !inDoubt {
		// The provider answered: nothing was created.
		if _, uerr := s.life.Update(ctx, j.ID, func(cur *state.Job) error {
			cur.SubmitInDoubt = false
			cur.LastError = provider.MessageOf(err)
			return nil
		}); uerr != nil {
			log.Warn().Err(uerr).Msg("clearing the in-doubt mark failed")
			return events.Later(s.jitter(time.Second)), "retry"
		}
	}
	switch class {
	case provider.Invalid:
		reason := "the provider refused the submission: " + provider.MessageOf(err)
		_, uerr := s.life.Update(ctx, j.ID, func(cur *state.Job) error {
			cur.Apply(state.Observation{State: state.Failed, Reason: reason, Source: state.FromSubmit, At: s.cfg.Now().UTC()})
			return nil
		})
		if uerr != nil {
			return events.Later(s.jitter(time.Second)), "retry"
		}
		log.Info().Str("reason", reason).Msg("submission refused by the provider")
		return events.Done(), "failed"
	case provider.RateLimited:
		d := cmp.Or(provider.RetryAfterOf(err), 5*time.Second)
		if _, perr := s.pauses.RateLimited(ctx, r.Name, d, provider.MessageOf(err)); perr != nil {
			log.Warn().Err(perr).Msg("recording the route pause failed")
		}
		log.Warn().Dur("pause", d).Msg("rate limited on submit; route paused")
		return events.Later(s.holdFor(r.Name) + s.jitter(100*time.Millisecond)), "retry"
	case provider.Auth:
		ps, perr := s.pauses.AuthFailed(ctx, r.Name, provider.MessageOf(err))
		if perr != nil {
			log.Warn().Err(perr).Msg("recording the route pause failed")
		}
		log.Error().Time("paused_until", ps.Until).Msg("AUTHENTICATION FAILED on submit: check the route's token; route paused")
		return events.Later(s.holdFor(r.Name) + s.jitter(time.Second)), "retry"
	}
	if inDoubt && !r.Adapter.Info().Idempotent {
		return s.advance(ctx, in, j, log) // marks the job lost
	}
	backoff := min(time.Duration(1<<min(in.attempt, 6))*time.Second, time.Minute)
	log.Warn().Err(err).Dur("retry_in", backoff).Msg("submit failed; retrying")
	return events.Later(s.jitter(backoff)), "retry"
}

// neverSent reports whether a failed call cannot have reached the provider.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func httpStatus(err error) int {
	var pe *provider.Error
	if errors.As(err, &pe) {
		return pe.HTTPStatus
	}
	return 0
}

func (s *Service) webhookURL(r *route.Route, j *state.Job) string {
	if !j.WebhookExpected {
		return ""
	}
	return r.JobWebhookURL(j.ID)
}

// arm makes sure a tracked job has its check message and its events out.
func (s *Service) arm(ctx context.Context, j *state.Job, log zerolog.Logger, result string) (events.Outcome, string) {
	if err := s.life.Flush(ctx, j); err != nil {
		log.Warn().Err(err).Msg("publishing events failed; retrying")
		return events.Later(s.jitter(time.Second)), "retry"
	}
	if j.State.Terminal() {
		return events.Done(), result
	}
	if err := s.life.Arm(ctx, j, j.NextCheckAt); err != nil {
		log.Warn().Err(err).Msg("arming the check failed; retrying")
		return events.Later(s.jitter(time.Second)), "retry"
	}
	return events.Done(), result
}

// track starts tracking a job submitted elsewhere.
func (s *Service) track(ctx context.Context, in intake) (events.Outcome, string) {
	now := s.cfg.Now().UTC()
	data := in.msg.Data()
	m, err := events.DecodeTrack(data)
	if err != nil {
		return s.reject(ctx, in, lenientID(data, events.MessageID(in.seq, in.stored)), err)
	}
	id := cmp.Or(m.ID, events.KeyID(in.route.Name, "remote:"+m.RemoteID))
	deadline, err := s.deadline(in.route, m.Deadline, m.TimeoutS, now)
	if err != nil {
		return s.reject(ctx, in, id, err)
	}
	j := &state.Job{
		ID: id, Route: in.route.Name, Model: m.Model, ConfigKey: m.ConfigKey, RemoteID: m.RemoteID,
		State: state.Queued, Metadata: m.Metadata, Tracked: true, IntakeSeq: in.seq,
		CreatedAt: now, SubmittedAt: now, ChangedAt: now, Deadline: deadline,
		ExpectedDuration: state.Duration(m.ExpectedDurationS * float64(time.Second)),
		WebhookExpected:  in.route.WebhookURL != "" && m.Webhook != nil && *m.Webhook,
	}
	j.Record(events.EventSubmitted, now)
	j.NextCheckAt = s.firstCheck(in.route, j, now)
	log := in.logger(s.log, id).With().Str("remote_id", m.RemoteID).Logger()

	_, err = s.life.Store().Create(ctx, j)
	if errors.Is(err, state.ErrExists) {
		cur, _, gerr := s.life.Store().Get(ctx, id)
		if gerr != nil {
			return events.Later(s.jitter(time.Second)), "retry"
		}
		if cur.Route != in.route.Name || cur.RemoteID != m.RemoteID {
			return s.reject(ctx, in, id, &events.FieldError{Field: "id", Problem: fmt.Sprintf("already used by job of remote id %s on route %s", cur.RemoteID, cur.Route)})
		}
		out, _ := s.arm(ctx, cur, log, "duplicate")
		return out, "duplicate"
	} else if err != nil {
		log.Warn().Err(err).Msg("creating the job failed; retrying")
		return events.Later(s.jitter(time.Second)), "retry"
	}
	log.Info().Msg("tracking")
	return s.arm(ctx, j, log, "tracked")
}

// cancel cancels a job.
func (s *Service) cancel(ctx context.Context, in intake) (events.Outcome, string) {
	data := in.msg.Data()
	m, err := events.DecodeCancel(data)
	if err != nil {
		return s.reject(ctx, in, lenientID(data, "_"), err)
	}
	log := in.logger(s.log, m.ID)
	now := s.cfg.Now().UTC()
	j, err := s.life.Update(ctx, m.ID, func(cur *state.Job) error {
		if cur.Route != in.route.Name || cur.State.Terminal() || !cur.CancelRequestedAt.IsZero() {
			return state.ErrNoChange
		}
		cur.CancelRequestedAt = now
		return nil
	})
	switch {
	case errors.Is(err, state.ErrNotFound):
		return s.reject(ctx, in, m.ID, &events.FieldError{Field: "id", Problem: "no such job"})
	case err != nil:
		log.Warn().Err(err).Msg("recording the cancel request failed; retrying")
		return events.Later(s.jitter(time.Second)), "retry"
	case j.Route != in.route.Name:
		return s.reject(ctx, in, m.ID, &events.FieldError{Field: "id", Problem: fmt.Sprintf("the job is on route %s, not %s", j.Route, in.route.Name)})
	case j.State.Terminal():
		log.Info().Str("state", string(j.State)).Msg("cancel of a finished job ignored")
		return events.Done(), "duplicate"
	case j.RemoteID == "":
		// Not submitted yet: the submission sees the request and cancels
		// instead of submitting.
		log.Info().Msg("cancel requested before submission")
		return events.Done(), "canceled"
	case !in.route.Adapter.Info().Cancel:
		return s.reject(ctx, in, m.ID, fmt.Errorf("route %s's provider cannot cancel jobs; the job is still tracked", in.route.Name))
	}
	if d := s.holdFor(in.route.Name); d > 0 {
		return events.Later(d), "retry"
	}
	if err := s.cancelRemote(ctx, in.route, j, log); err != nil {
		backoff := min(time.Duration(1<<min(in.attempt, 6))*time.Second, time.Minute)
		return events.Later(s.jitter(backoff)), "retry"
	}
	return events.Done(), "canceled"
}

// cancelRemote asks the provider to cancel and applies its answer; when the
// answer is not final it brings the next check forward to confirm.
func (s *Service) cancelRemote(ctx context.Context, r *route.Route, j *state.Job, log zerolog.Logger) error {
	lease, err := s.statusBudgets[r.Name].Acquire(ctx)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, cmp.Or(r.CallTimeout, s.cfg.CallTimeout))
	start := time.Now()
	st, err := r.Adapter.Cancel(cctx, provider.JobRef(j))
	cancel()
	lease.Release()
	s.observeCall(r.Name, "cancel", err, time.Since(start))
	if err != nil {
		switch provider.ClassOf(err) {
		case provider.NotFound:
			log.Warn().Msg("cancel: the provider does not know the job; polling will reconcile")
			return nil
		case provider.RateLimited:
			if _, perr := s.pauses.RateLimited(ctx, r.Name, cmp.Or(provider.RetryAfterOf(err), 5*time.Second), provider.MessageOf(err)); perr != nil {
				log.Warn().Err(perr).Msg("recording the route pause failed")
			}
		case provider.Auth:
			if _, perr := s.pauses.AuthFailed(ctx, r.Name, provider.MessageOf(err)); perr != nil {
				log.Warn().Err(perr).Msg("recording the route pause failed")
			}
		}
		log.Warn().Err(err).Msg("cancel call failed")
		return err
	}
	now := s.cfg.Now().UTC()
	// The check is removed or replaced next: its quiet polls go into the
	// record first.
	seen, err := s.life.CurrentCheck(ctx, r.Name, j.ID)
	if err != nil {
		seen = nil // Rearm or Disarm read it again
	}
	polls, unchanged, _ := poller.CountPolls(r, s.cfg.Learned, seen, now)
	j, err = s.life.Update(ctx, j.ID, func(cur *state.Job) error {
		obs := st.Observation
		obs.Source, obs.At = state.FromCancel, now
		if cur.Apply(obs) == "" {
			return state.ErrNoChange
		}
		cur.Polls, cur.Unchanged = max(cur.Polls, polls), max(cur.Unchanged, unchanged)
		return nil
	})
	if err != nil {
		return err
	}
	log.Info().Str("state", string(j.State)).Msg("cancel requested at the provider")
	if !j.State.Terminal() {
		return s.life.Rearm(ctx, j, now.Add(time.Second), seen)
	}
	return s.life.Disarm(ctx, j.Route, j.ID, seen)
}

func (s *Service) observeCall(route, op string, err error, d time.Duration) {
	if s.cfg.Metrics.ProviderCall == nil {
		return
	}
	class := "ok"
	if err != nil {
		class = provider.ClassOf(err).String()
	}
	s.cfg.Metrics.ProviderCall(route, op, class, d)
}
