package webhook

// The consumer side: stored deliveries applied to their jobs by the jobs'
// owner, in the same binary as the receiver.

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// apply hands one stored delivery to the jobs' owner.
func (s *Service) apply(ctx context.Context, msg jetstream.Msg) events.Outcome {
	name, err := s.ns.ParseWebhook(msg.Subject())
	if err != nil {
		s.log.Error().Err(err).Msg("dropping a delivery on an unexpected subject")
		return events.Stop()
	}
	r, ok := s.cfg.Routes[name]
	if !ok || (r.Webhooks == nil && r.Callbacks == nil) {
		// Another process serves this route; leave it for that process.
		s.log.Warn().Str(logkey.Route, name).Msg("delivery for a route this process does not serve; redelivering later")
		return events.Later(30 * time.Second)
	}
	var began time.Time // when the application began, for its span
	if s.jobs.Tracer() != nil {
		began = time.Now()
	}
	h := http.Header(msg.Headers())
	id, delivery := h.Get(HeaderJob), h.Get(HeaderDelivery)
	log := s.log.With().Str(logkey.Route, name).Str(logkey.JobID, id).Str(logkey.DeliveryID, delivery).Logger()
	held := s.held(msg, h)
	late := held > s.window(r)
	if h.Get(HeaderCallback) != "" {
		return s.hint(ctx, msg, name, id, h.Get(HeaderRemoteID), late, log)
	}
	if r.Webhooks == nil {
		log.Error().Msg("dropping a signed delivery on a route that takes only callbacks")
		return s.drop(name, "unreadable")
	}
	st, err := r.Webhooks.ParseWebhook(h, msg.Data())
	if err != nil {
		log.Error().Err(err).Msg("dropping an unreadable delivery")
		return s.drop(name, "unreadable")
	}
	if st.State == state.Unknown || st.State == "" {
		// It names the job but not its state (an event that carries only
		// the id, or one the adapter could not verify): a hint, as an
		// unsigned callback is. The job is checked now.
		return s.hint(ctx, msg, name, id, st.RemoteID, late, log)
	}
	applied, err := s.jobs.Webhook(ctx, jobs.Notice{Route: name, JobID: id, DeliveryID: delivery,
		RemoteID: st.RemoteID, Obs: st.Observation, Unarmed: late})
	if err != nil {
		return s.settled(msg, name, err, late, log.With().Str(logkey.RemoteID, st.RemoteID).Logger())
	}
	s.applySpan(ctx, h, name, delivery, began, held, applied)
	if s.cfg.Metrics.Applied != nil {
		s.cfg.Metrics.Applied(name, applied.Changed)
	}
	if applied.Changed && applied.Job.State.Terminal() {
		log.Info().Str(logkey.State, string(applied.Job.State)).Str(logkey.RemoteID, applied.Job.RemoteID).Msg("job finished (webhook)")
	}
	return events.Done()
}

// hint brings a job's next check forward to now for a delivery that says
// it changed without saying how.
func (s *Service) hint(ctx context.Context, msg jetstream.Msg, name, id, remoteID string, late bool, log zerolog.Logger) events.Outcome {
	err := s.jobs.Hint(ctx, name, id, remoteID)
	if err == nil {
		if s.cfg.Metrics.Hinted != nil {
			s.cfg.Metrics.Hinted(name)
		}
		log.Debug().Msg("hint: checking the job now")
	}
	return s.settled(msg, name, err, late, log)
}

// settled is the outcome of a delivery the owner did not apply: kept for
// a retry while the job may still take it, else dropped and counted.
func (s *Service) settled(msg jetstream.Msg, route string, err error, late bool, log zerolog.Logger) events.Outcome {
	switch {
	case err == nil:
		return events.Done()
	case errors.Is(err, jobs.ErrMismatch):
		log.Warn().Msg("delivery does not match the job's route or remote id; dropped")
		return s.drop(route, "mismatch")
	case errors.Is(err, jobs.ErrNotReady) && late:
		log.Warn().Msg("no job took the delivery within its hold window; dropped")
		return s.drop(route, "unknown_job")
	case errors.Is(err, jobs.ErrNotReady):
		n := 1
		if md, merr := msg.Metadata(); merr == nil {
			n = int(md.NumDelivered)
		}
		return events.Later(schedule.Backoff{Base: 100 * time.Millisecond, Max: 5 * time.Second}.Next(n, s.rnd))
	}
	log.Warn().Err(err).Msg("applying a delivery failed; retrying")
	return events.Later(schedule.Jitter(2*time.Second, schedule.RetryJitter, s.rnd))
}

func (s *Service) drop(route, reason string) events.Outcome {
	if s.cfg.Metrics.Dropped != nil {
		s.cfg.Metrics.Dropped(route, reason)
	}
	return events.Stop()
}

// window is how long a delivery route's jobs cannot take yet is kept (see
// Config.Hold).
func (s *Service) window(r *route.Route) time.Duration {
	return max(s.cfg.Hold, cmp.Or(r.CallTimeout, 30*time.Second)+30*time.Second)
}

// held is how long ago the delivery was received.
func (s *Service) held(msg jetstream.Msg, h http.Header) time.Duration {
	at, err := time.Parse(time.RFC3339Nano, h.Get(HeaderReceivedAt))
	if err != nil {
		md, merr := msg.Metadata()
		if merr != nil {
			return 0
		}
		at = md.Timestamp
	}
	return s.cfg.Now().Sub(at)
}
