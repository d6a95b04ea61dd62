package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

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
			if _, err := s.jobs.End(ctx, rec, obs, jobs.UnlessSubmitted); err != nil {
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
