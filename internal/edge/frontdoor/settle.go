package frontdoor

import (
	"context"
	"errors"
	"time"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Settling a create answered 503 in doubt. Its submission was sent, no
// ack came within DoubtWait, and the app was told it failed: it will
// retry, with a new id unless it sent a key. A copy of the message may
// be stored already, or be stored yet (the duplicate window), and ingest
// would make it a job — at the provider, paid for — that no app holds an
// id for. So, once NATS answers, the front door makes sure it makes
// nothing, through the jobs' owner: it creates the job's record ended
// (jobs.Owner.Withdraw: canceled, UnconfirmedReason), which ingest then
// finds and makes nothing of; or, when ingest took the submission first,
// it requests its cancel (a job that has not reached the provider ends at
// once; one that has is canceled there). Every settlement is logged
// loudly and counted (Metrics.Unconfirmed).

// UnconfirmedReason is the reason of a job withdrawn, or canceled, because
// its create was answered 503 before NATS confirmed its submission.
const UnconfirmedReason = "its create was answered 503: NATS did not confirm the submission in time, and no app holds its id"

// How a submission answered 503 in doubt was settled (Metrics.Unconfirmed).
const (
	// SettledWithdrawn: its record was created ended before ingest took
	// it; nothing was made.
	SettledWithdrawn = "withdrawn"
	// SettledCanceled: ingest had taken it; its cancel was requested (it
	// ended at once unless it had reached the provider).
	SettledCanceled = "canceled"
	// SettledEnded: ingest had taken it and it had ended already: a job
	// no app holds an id for.
	SettledEnded = "ended"
	// SettledAbandoned: the front door stopped before NATS answered.
	SettledAbandoned = "abandoned"
)

// settleGrace is how long a stopping front door waits for its
// settlements under way.
const settleGrace = 10 * time.Second

// settle settles submission m of job id on route, answered 503 while its
// storing was in doubt (why: cause), in the background until it is done
// or the front door stops.
func (s *Server) settle(route, id string, m events.Submit, cause error) {
	log := s.log.With().Str(logkey.JobID, id).Str(logkey.Route, route).Str(logkey.By, m.By).Logger()
	log.Error().Err(cause).Msg("A CREATE WAS ANSWERED 503 WHILE ITS SUBMISSION WAS IN DOUBT: making sure it makes no job once NATS answers")
	j := &state.Job{ID: id, Route: route, Model: m.Model, Metadata: m.Metadata, IdempotencyKey: m.IdempotencyKey, SubmittedBy: m.By}
	if !s.knownRoute(route) {
		j.Routing = &state.Routing{Via: route} // a model route's: ingest follows it
	}
	s.intake.settles.Add(1)
	go func() {
		defer s.intake.settles.Done()
		backoff := schedule.Backoff{Base: 200 * time.Millisecond, Max: 5 * time.Second}
		var logged time.Time
		for n := 1; ; n++ {
			outcome, err := s.settleOnce(s.intake.stop, j, m.By)
			if err == nil {
				s.settled(route, outcome)
				ev := log.Warn()
				if outcome == SettledEnded {
					ev = log.Error()
				}
				ev.Str(logkey.Outcome, outcome).Int(logkey.Attempts, n).Msg("a create answered 503 in doubt is settled")
				return
			}
			if time.Since(logged) > 30*time.Second {
				log.Warn().Err(err).Int(logkey.Attempt, n).Msg("settling a create answered 503 in doubt failed; retrying until NATS answers")
				logged = time.Now()
			}
			if !schedule.Sleep(s.intake.stop, backoff.Delay(n)) {
				s.settled(route, SettledAbandoned)
				log.Error().Err(err).Msg("THE FRONT DOOR STOPPED BEFORE IT COULD SETTLE A CREATE ANSWERED 503: if ingest takes its submission, cancel the job")
				return
			}
		}
	}()
}

// settleOnce tries the settlement of job j once (by: who submitted it).
func (s *Server) settleOnce(ctx context.Context, j *state.Job, by string) (string, error) {
	if err := s.readable(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	rec, created, err := s.jobs.Withdraw(ctx, cloneShallow(j), UnconfirmedReason, by)
	switch {
	case err != nil:
		return "", err
	case created:
		return SettledWithdrawn, nil
	case rec.State.Terminal():
		return SettledEnded, nil
	}
	if e := s.requestCancelBy(ctx, rec.Job, UnconfirmedReason, by); e != nil {
		if e.detail.Code == CodeJobTerminal {
			return SettledEnded, nil
		}
		return "", errors.New(e.detail.Message)
	}
	return SettledCanceled, nil
}

// settled counts a settlement.
func (s *Server) settled(route, outcome string) {
	if s.cfg.Metrics.Unconfirmed != nil {
		s.cfg.Metrics.Unconfirmed(route, outcome)
	}
}

// waitSettles waits for the settlements under way, at most settleGrace,
// then ends them.
func (s *Server) waitSettles() {
	done := make(chan struct{})
	go func() { s.intake.settles.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(settleGrace):
		s.intake.cancel()
		<-done
	}
	s.intake.cancel()
}

// cloneShallow is a copy of j a try may change (Withdraw sets its state).
func cloneShallow(j *state.Job) *state.Job {
	c := *j
	return &c
}
