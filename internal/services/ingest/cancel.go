package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
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
	rec, ended, err := s.jobs.RequestCancelBy(ctx, in.routeName, m.ID, m.Reason, m.By)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return s.reject(ctx, in, m.ID, &events.FieldError{Field: "id", Problem: "no such job"})
	case errors.Is(err, jobs.ErrOtherRoute):
		return s.reject(ctx, in, m.ID, &events.FieldError{Field: "id", Problem: fmt.Sprintf("the job is on route %s, not %s", rec.Route, in.routeName)})
	case err != nil:
		return s.retry(log, err, "recording the cancel request")
	case ended:
		// It never reached the provider (held, waiting for a slot, between
		// tries): the request ended it.
		log.Info().Msg("canceled before it was submitted")
		return events.Done(), "canceled"
	}
	switch cancelNext(rec.Job, in.route.Adapter.Info().Cancel) {
	case cancelFinished:
		log.Info().Str(logkey.State, string(rec.State)).Msg("cancel of a finished job ignored")
		return events.Done(), "duplicate"
	case cancelUnsubmitted:
		// Its create is under way, or in doubt: the submission sees the
		// request, and cancels the job once it is created (rearm).
		log.Info().Msg("cancel requested while the job's create is under way")
		return events.Done(), "canceled"
	case cancelUnsupported:
		return s.reject(ctx, in, m.ID, fmt.Errorf("route %s's provider cannot cancel jobs; the job is still tracked", in.routeName))
	}
	err = s.cancelRemote(ctx, in.route, rec, log)
	var held *route.HeldError
	switch {
	case errors.As(err, &held):
		return events.Later(held.Wait), "retry"
	case err != nil:
		return events.Later(s.backoff(int(in.attempt))), "retry"
	}
	return events.Done(), "canceled"
}

// cancelPending reports whether job j, created, has a cancel request that
// its own message may have found before the remote id was recorded.
func cancelPending(j *state.Job) bool {
	return !j.CancelRequestedAt.IsZero() && j.RemoteID != "" && !j.State.Terminal()
}

// cancelAgain publishes a cancel request for job j, once per create
// attempt (Nats-Msg-Id): its handling calls the provider.
func (s *Service) cancelAgain(ctx context.Context, j *state.Job) error {
	b, err := json.Marshal(events.Cancel{V: events.Version, ID: j.ID, Reason: j.CancelReason, By: j.CancelRequestedBy})
	if err != nil {
		return err
	}
	_, err = s.js.Publish(ctx, s.ns.Cancel(j.Route), b, jetstream.WithMsgID("cancel-created:"+j.ID+":"+j.AttemptID))
	return err
}

// cancelRemote asks the provider to cancel the job and hands its answer to
// the owner; a *route.HeldError when the gate held the call.
func (s *Service) cancelRemote(ctx context.Context, r *route.Route, rec jobs.Record, log zerolog.Logger) error {
	st, err := s.gate[r.Name].Call(ctx, route.Call{Op: route.OpCancel, Ref: provider.JobRef(rec.Job), Job: rec.Job, Log: &log})
	var held *route.HeldError
	switch {
	case errors.As(err, &held):
		return err
	case err != nil && provider.ClassOf(err) == provider.NotFound:
		log.Warn().Msg("cancel: the provider does not know the job; polling will reconcile")
		return nil
	case err != nil:
		log.Warn().Err(err).Msg("cancel call failed")
		return err
	}
	obs := st.Observation
	obs.Source, obs.At = state.FromCancel, s.cfg.Now().UTC()
	rec, err = s.jobs.Canceled(ctx, rec, obs)
	if err != nil {
		return err
	}
	log.Info().Str(logkey.State, string(rec.State)).Msg("cancel requested at the provider")
	return nil
}
