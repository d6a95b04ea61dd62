package ingest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Submissions in doubt: a create that got no answer may have made the job.
// resolve (decide.go) says how it is settled; these steps carry it out.

// inDoubt resolves a submission whose last call's outcome is unknown.
// After a call this handling just made (interrupted), a retry or a lookup
// waits for the message's next delivery: the provider gets time, and
// calls do not follow each other in a loop.
func (s *Service) inDoubt(ctx context.Context, in intake, rec jobs.Record, interrupted bool, log zerolog.Logger) move {
	r := in.route
	res, until := resolve(rec.Job, r.Adapter.Info(), r.CanFind(), s.callTimeout(r), s.cfg.Now(), s.reconnected())
	switch {
	case res == resolveWait:
		return end(events.Later(until.Sub(s.cfg.Now())), "retry")
	case interrupted && res == resolveRetry:
		return end(events.Later(s.backoff(rec.SubmitFailures+1)), "retry")
	}
	switch res {
	case resolveLost:
		return move{to: stepLost, rec: rec, reason: lostReason(r, rec.Job)}
	case resolveFind:
		st, err := s.find(ctx, r, rec.Job)
		var held *route.HeldError
		switch {
		case err == nil:
			log.Info().Str(logkey.RemoteID, st.RemoteID).Msg("the submission in doubt was found at the provider")
			return move{to: stepCreated, rec: rec, status: st}
		case errors.Is(err, route.ErrNoSuchJob):
			log.Info().Msg("the provider does not have the submission in doubt; submitting it")
		case errors.Is(err, provider.ErrCannotTell) && r.Adapter.Info().Idempotent:
			log.Info().Err(err).Msg("the provider cannot tell whether it has the submission in doubt; it deduplicates, so submitting it again")
		case errors.Is(err, provider.ErrCannotTell):
			return move{to: stepLost, rec: rec, reason: cannotTellReason(r, rec.Job, err)}
		case errors.As(err, &held):
			return end(events.Later(held.Wait), "retry")
		default:
			log.Warn().Err(err).Msg("looking the submission in doubt up at the provider failed; retrying")
			return end(events.Later(s.backoff(rec.SubmitFailures+1)), "retry")
		}
	}
	// Submit again: the provider deduplicates, or it said it has no such
	// job.
	return move{to: stepSubmit, rec: rec}
}

// giveUp ends a submission in doubt as lost, for reason — unless its
// attempt's own process recorded the job meanwhile.
func (s *Service) giveUp(ctx context.Context, rec jobs.Record, reason string, log zerolog.Logger) move {
	obs := state.Observation{State: state.Lost, Reason: reason, Source: state.FromPollux, At: s.cfg.Now().UTC()}
	after, err := s.jobs.End(ctx, rec, obs, jobs.UnlessSettled)
	if err != nil {
		return end(s.retry(log, err, "recording the job lost"))
	}
	if !after.State.Terminal() || after.State != state.Lost {
		return decided(after) // recorded meanwhile by the attempt's own process
	}
	log.Error().Str(logkey.Reason, reason).Msg("submission in doubt after an interrupted call; marked lost rather than risk a duplicate")
	return end(events.Done(), "lost")
}

// find asks the provider for the job a submission created, under the
// status budget: its status when found, route.ErrNoSuchJob when not.
func (s *Service) find(ctx context.Context, r *route.Route, j *state.Job) (provider.Status, error) {
	g := s.gate[r.Name]
	req := s.request(r, j)
	req.AttemptedAt, req.AttemptEnded = j.AttemptedAt, j.AttemptedAt.Add(g.Timeout(route.OpSubmit))
	return g.Call(ctx, route.Call{Op: route.OpFind, Request: req, Job: j})
}

// reconnects is when this process's NATS connection was last
// re-established, as far as it has seen (reconnected).
type reconnects struct {
	mu   sync.Mutex
	seen uint64
	at   time.Time
}

// reconnected returns when this process's NATS connection was last
// re-established (zero if never): resolve holds a doubt about an attempt
// made before it for reconnectGrace, as another process may hold that
// attempt's answer. watchReconnects notices a reconnect within a second;
// a doubt checked before it does notices it itself.
func (s *Service) reconnected() time.Time {
	n := s.js.Conn().Stats().Reconnects
	s.reconnects.mu.Lock()
	defer s.reconnects.mu.Unlock()
	if n != s.reconnects.seen {
		s.reconnects.seen, s.reconnects.at = n, s.cfg.Now()
	}
	return s.reconnects.at
}

// watchReconnects keeps reconnected's time within a second of the
// reconnect, until ctx ends.
func (s *Service) watchReconnects(ctx context.Context) error {
	for schedule.Sleep(ctx, time.Second) {
		s.reconnected()
	}
	return nil
}
