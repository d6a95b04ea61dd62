package ingest

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/faultpoint"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// The submit step and what its answer leads to: a create recorded, or a
// failure carried out.

// submitAgain makes another submit call for a job whose submission is
// not known to have reached the provider: its running slots, a lease, the
// attempt marked, then the call — unless the record moved on meanwhile.
// A job that never reached the provider and whose deadline has passed
// (it waited for a slot that long) expires instead, without a create.
func (s *Service) submitAgain(ctx context.Context, in intake, rec jobs.Record, log zerolog.Logger) move {
	if !rec.SubmitInDoubt && !s.cfg.Now().Before(rec.Deadline) {
		obs := state.Observation{State: state.Expired, Reason: "the deadline passed before the job could be submitted", Source: state.FromPollux, At: s.cfg.Now().UTC()}
		if _, err := s.jobs.End(ctx, rec, obs, jobs.Always); err != nil {
			return end(s.retry(log, err, "recording the job expired"))
		}
		log.Info().Str("waited_for", rec.WaitingFor).Msg("expired before it was submitted")
		return end(events.Done(), "expired")
	}
	if d, why := s.paused(in.route); why != "" && !rec.SubmitInDoubt {
		return s.hold(ctx, in, rec, d, why, log)
	}
	g := s.gate[in.routeName]
	slots, full, err := g.Take(ctx, rec.ID, rec.Slots)
	if err != nil {
		return end(s.retry(log, err, "taking a running slot"))
	}
	if full != "" {
		if rec, err = s.jobs.Hold(ctx, rec, full); err != nil {
			return end(s.retry(log, err, "recording the job waiting for a running slot"))
		}
		return move{to: stepWait, rec: rec}
	}
	// Exclusive unless resolving a doubt: a job the queue and a
	// redelivery start at once is attempted once.
	attempt := s.attemptID()
	ans, rec, err := s.create(ctx, in.route, rec.Job, log, func(ctx context.Context) (jobs.Record, bool, error) {
		rec, err := s.jobs.Attempt(ctx, rec, attempt, slots, !rec.SubmitInDoubt)
		return rec, err == nil && rec.AttemptID == attempt, err
	})
	if m, ok := s.createdOr(ans, rec, err, "recording the submit attempt", log); ok {
		return m
	}
	// Changed meanwhile: another process's attempt, or the job moved on.
	if rec.SubmitInDoubt && rec.RemoteID == "" && !rec.State.Terminal() {
		return end(events.Later(s.callTimeout(in.route)), "retry")
	}
	return decided(rec)
}

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
// admitted, attempt records it (the record's attempt marked) and says
// whether to make it; the record it returns is the one create returns,
// with attempt's error.
func (s *Service) create(ctx context.Context, r *route.Route, j *state.Job, log zerolog.Logger, attempt func(context.Context) (jobs.Record, bool, error)) (route.Answer, jobs.Record, error) {
	var rec jobs.Record
	var err error
	var span trace.Span
	ans := s.gate[r.Name].Call(ctx, route.Call{Op: route.OpSubmit, Request: s.request(r, j), Log: &log,
		Ready: func(ctx context.Context) (context.Context, bool) {
			var ok bool
			if rec, ok, err = attempt(ctx); !ok {
				return ctx, false
			}
			ctx, span = s.callSpan(ctx, r, "submit", rec.Job)
			return ctx, true
		}})
	if ans.Called {
		endCall(span, ans.Status, ans.Err)
	}
	return ans, rec, err
}

// createdOr is where a create leads: its answer (created, or failed), a
// wait when it was not admitted (the route paused, the budget busy), a
// retry when its attempt could not be recorded (what); false when the
// attempt found the record moved on, which the caller takes up.
func (s *Service) createdOr(ans route.Answer, rec jobs.Record, err error, what string, log zerolog.Logger) (move, bool) {
	switch {
	case ans.Called && ans.Err != nil:
		return move{to: stepFailed, rec: rec, err: ans.Err}, true
	case ans.Called:
		faultpoint.Hit("after-submit") // the provider has the job; the record does not know yet
		return move{to: stepCreated, rec: rec, status: ans.Status}, true
	case !ans.Skipped:
		return end(events.Later(ans.Wait), "retry"), true
	case err != nil:
		return end(s.retry(log, err, what)), true
	}
	return move{}, false
}

// created records the provider's acceptance of the job (the owner keeps
// retrying until it lands) and cancels the job at once if a cancel came
// meanwhile.
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
	return end(events.Done(), "submitted")
}

// submitFailed carries out what a failed submit call means (failed,
// decide.go).
func (s *Service) submitFailed(ctx context.Context, in intake, rec jobs.Record, err error, log zerolog.Logger) move {
	r := in.route
	log = log.With().Str("error_class", provider.ClassOf(err).String()).Logger()
	switch failed(err) {
	case outRefused:
		reason := "the provider refused the submission: " + provider.MessageOf(err)
		obs := state.Observation{State: state.Failed, Reason: reason, Source: state.FromSubmit, At: s.cfg.Now().UTC()}
		if _, uerr := s.jobs.Refused(ctx, rec, provider.MessageOf(err), &obs); uerr != nil {
			return end(s.retry(log, uerr, "recording the refusal"))
		}
		log.Info().Str("reason", reason).Msg("submission refused by the provider")
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
		if _, uerr := s.jobs.Refused(ctx, rec, provider.MessageOf(err), nil); uerr != nil {
			return end(s.retry(log, uerr, "clearing the attempt"))
		}
		backoff := s.backoff(in)
		log.Warn().Err(err).Dur("retry_in", backoff).Msg("submit failed; retrying")
		return end(events.Later(backoff), "retry")
	}
	log.Warn().Err(err).Msg("the submit call got no answer; its outcome is in doubt")
	return move{to: stepInDoubt, rec: rec, interrupted: true}
}
