package ingest

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/faultpoint"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// The submit step and what its answer leads to: a create recorded, or a
// failure carried out.

// attempt is the submit step: another submit call for a job whose
// submission is not known to have reached the provider — a first
// delivery's job, unstored (m.fresh), or a stored one (m.rec). Its
// running slots, a lease, the attempt marked (the record created with it
// for a fresh job), then the call — unless the record moved on meanwhile.
// A job that never reached the provider and whose deadline has passed
// (it waited for a slot that long) expires instead, without a create; one
// whose route is paused is held (hold.go); one that finds a level's
// running slots taken, or others queued before it, waits (stepWait).
func (s *Service) attempt(ctx context.Context, in intake, m move, log zerolog.Logger) move {
	r, rec, fresh := in.route, m.rec, m.fresh
	j := rec.Job
	if fresh != nil {
		j = fresh
	}
	if fresh == nil && !rec.SubmitInDoubt && !s.cfg.Now().Before(rec.Deadline) {
		obs := state.Observation{State: state.Expired, Reason: "the deadline passed before the job could be submitted", Source: state.FromPollux, At: s.cfg.Now().UTC()}
		if _, err := s.jobs.End(ctx, rec, obs, jobs.Always); err != nil {
			return end(s.retry(log, err, "recording the job expired"))
		}
		log.Info().Str(logkey.WaitedFor, rec.WaitingFor).Msg("expired before it was submitted")
		return end(events.Done(), "expired")
	}
	if d, why := s.paused(r); why != "" && !j.SubmitInDoubt {
		return s.hold(ctx, in, m, d, why, log)
	}
	if q := s.queues[r.Queue()]; fresh != nil && q != nil && q.busy() {
		// Others wait for the slots: it queues behind them.
		fresh.WaitingFor = "queue " + q.name
		return move{to: stepWait, fresh: fresh}
	}
	g := s.gate[r.Name]
	slots, full, err := g.Take(ctx, j.ID, j.App, j.Slots)
	if err != nil {
		return end(s.retry(log, err, "taking a running slot"))
	}
	if full != "" {
		if fresh != nil {
			fresh.WaitingFor = full
			return move{to: stepWait, fresh: fresh}
		}
		if rec, err = s.jobs.Hold(ctx, rec, full); err != nil {
			return end(s.retry(log, err, "recording the job waiting for a running slot"))
		}
		return move{to: stepWait, rec: rec}
	}
	id := s.attemptID()
	mark := func(ctx context.Context) (jobs.Record, bool, error) {
		// Exclusive unless resolving a doubt: a job the queue and a
		// redelivery start at once is attempted once.
		after, err := s.jobs.Attempt(ctx, rec, id, slots, !rec.SubmitInDoubt)
		return after, err == nil && after.AttemptID == id, err
	}
	if fresh != nil {
		mark = func(ctx context.Context) (jobs.Record, bool, error) {
			fresh.Slots = slots
			fresh.SubmitAttempts, fresh.SubmitInDoubt, fresh.AttemptedAt, fresh.AttemptID = 1, true, s.cfg.Now().UTC(), id
			after, created, err := s.jobs.Accept(ctx, fresh)
			return after, err == nil && created, err
		}
	}
	st, after, err := s.create(ctx, r, j, mark, log)
	var held *route.HeldError
	switch {
	case errors.As(err, &held):
		// Not admitted (paused meanwhile, no lease): a slot taken stays
		// the job's, and its next delivery finds it.
		return end(events.Later(held.Wait), "retry")
	case errors.Is(err, errMovedOn):
	case errors.Is(err, route.ErrDeclined):
		return end(s.retry(log, err, "recording the submit attempt"))
	case err != nil:
		return move{to: stepFailed, rec: after, err: err}
	default:
		faultpoint.Hit("after-submit") // the provider has the job; the record does not know yet
		return move{to: stepCreated, rec: after, status: st}
	}
	// The record moved on meanwhile: another process's attempt, a cancel,
	// or the job created or ended (a duplicate, a redelivery).
	if st := nextStep(after.Job, in.routeName, in.seq); st == stepFinished || st == stepResume {
		// The slots just taken that its record does not name are nobody's.
		if err := g.Free(ctx, j.ID, j.App, after.Slots); err != nil {
			log.Warn().Err(err).Msg("freeing running slots taken for a job created already failed; the repair frees them")
		}
	}
	if fresh == nil && after.SubmitInDoubt && after.RemoteID == "" && !after.State.Terminal() {
		return end(events.Later(s.callTimeout(r)), "retry") // another process's attempt under way
	}
	return decided(after)
}

// errMovedOn declines a create whose attempt found the record moved on.
var errMovedOn = errors.New("the job's record moved on")

// request is what a create (or a find) of job j sends the provider.
func (s *Service) request(r *route.Route, j *state.Job) provider.SubmitRequest {
	req := provider.SubmitRequest{
		JobID: j.ID, Model: j.Model, Input: j.Input, IdempotencyKey: j.IdempotencyKey, Deadline: j.Deadline,
	}
	if j.WebhookExpected {
		req.WebhookURL = r.JobWebhookURL(j.ID)
	}
	return req
}

// create asks the route's gate for a create of job j. Once the call is
// admitted, mark records it (the record's attempt marked) and says
// whether to make it; create returns the provider's answer (or the
// gate's: a *route.HeldError, errMovedOn when mark declined, mark's own
// error wrapped with route.ErrDeclined) and the record mark returned.
func (s *Service) create(ctx context.Context, r *route.Route, j *state.Job, mark func(context.Context) (jobs.Record, bool, error), log zerolog.Logger) (provider.Status, jobs.Record, error) {
	var rec jobs.Record
	st, err := s.gate[r.Name].Call(ctx, route.Call{Op: route.OpSubmit, Request: s.request(r, j), Job: j, Log: &log,
		Ready: func(ctx context.Context) (*state.Job, error) {
			var ok bool
			var err error
			if rec, ok, err = mark(ctx); err != nil {
				return nil, err
			}
			if !ok {
				return nil, errMovedOn
			}
			return rec.Job, nil
		}})
	return st, rec, err
}

// created records the provider's acceptance of the job (the owner keeps
// retrying until it lands). A cancel that came meanwhile, whose own
// message found the job without a remote id, is carried out by the
// resume step the record leads to (rearm).
func (s *Service) created(ctx context.Context, in intake, rec jobs.Record, st provider.Status, log zerolog.Logger) move {
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
		return end(events.Later(time.Second), "retry")
	}
	log.Info().Str(logkey.RemoteID, rec.RemoteID).Str(logkey.State, string(rec.State)).Msg("submitted")
	s.indexRemote(ctx, r, rec.Job, log)
	if cancelPending(rec.Job) {
		return decided(rec)
	}
	return end(events.Done(), "submitted")
}

// submitFailed carries out what a failed submit call means (failed,
// decide.go).
func (s *Service) submitFailed(ctx context.Context, in intake, rec jobs.Record, err error, log zerolog.Logger) move {
	r := in.route
	log = log.With().Str(logkey.ErrorClass, provider.ClassOf(err).String()).Logger()
	switch failed(err) {
	case outRefused:
		reason := "the provider refused the submission: " + provider.MessageOf(err)
		obs := state.Observation{State: state.Failed, Reason: reason, Source: state.FromSubmit, At: s.cfg.Now().UTC()}
		if _, uerr := s.jobs.Refused(ctx, rec, provider.MessageOf(err), &obs); uerr != nil {
			return end(s.retry(log, uerr, "recording the refusal"))
		}
		log.Info().Str(logkey.Reason, reason).Msg("submission refused by the provider")
		return end(events.Done(), "failed")
	case outPaused:
		if r.SlotRefusal(err) {
			// The provider runs as many as it allows: the job gives its
			// slots back and waits for one (its running cap, if learned,
			// came down meanwhile: route.Gate.Call).
			after, uerr := s.jobs.Requeue(ctx, rec, provider.MessageOf(err), "the provider's running cap")
			if uerr != nil {
				return end(s.retry(log, uerr, "putting the job back to wait for a slot"))
			}
			log.Info().Msg("the provider refused the create for its cap on jobs running at once; waiting for a slot")
			return move{to: stepWait, rec: after}
		}
		if _, uerr := s.jobs.Refused(ctx, rec, provider.MessageOf(err), nil); uerr != nil {
			return end(s.retry(log, uerr, "clearing the attempt"))
		}
		d, _ := s.paused(r)
		return end(events.Later(d+schedule.Jitter(100*time.Millisecond, schedule.RetryJitter, s.rnd)), "retry")
	case outAnswered:
		after, uerr := s.jobs.Failed(ctx, rec, provider.MessageOf(err))
		if uerr != nil {
			return end(s.retry(log, uerr, "clearing the attempt"))
		}
		backoff := s.backoff(after.SubmitFailures)
		log.Warn().Err(err).Dur(logkey.RetryIn, backoff).Msg("submit failed; retrying")
		return end(events.Later(backoff), "retry")
	}
	log.Warn().Err(err).Msg("the submit call got no answer; its outcome is in doubt")
	return move{to: stepInDoubt, rec: rec, interrupted: true}
}
