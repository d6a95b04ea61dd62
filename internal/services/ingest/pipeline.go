package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// A submission's pipeline. Handling a submission — a first delivery, a
// redelivery, a job the admission queue starts — is one loop (drive)
// over steps. The pure decision (nextStep, decide.go) names the step the
// job's record needs; each step does one thing — a provider call through
// the route's gate, or a decision handed to the jobs' owner as a value —
// and returns a move: the record as it now stands (the loop decides
// again), the step its result leads to (a create's answer, a loss, a
// wait), or the end of the handling, with the message's outcome. No step
// calls another; the loop alone goes from one to the next.
//
//	first delivery (submit.go) ─────────────┐ the job, unstored
//	redelivery ──► decide ──► submit (attempt.go) ──► created ──► end
//	                 │  ▲      │    │     │
//	                 │  │      │    │     └─► failed ──► in doubt (doubt.go) ──► lost
//	                 │  │      │    └─► wait (submit.go: the admission queue) ──► end
//	                 │  └──────┴─► held (hold.go: the route is paused) ──► end
//	                 └─► resume, finished, duplicate, reject, cancel ──► end

// Steps a step leads to; nextStep never answers them.
const (
	// stepDecide: nextStep decides from the record.
	stepDecide step = stepInDoubt + 1 + iota
	// stepCreated: the provider has the job (move.status): record it.
	stepCreated
	// stepFailed: the create failed (move.err): carry out what it means.
	stepFailed
	// stepLost: the submission in doubt is given up (move.reason).
	stepLost
	// stepWait: the job waits for a running slot: queue it.
	stepWait
)

// move is what a step hands the loop: the next step and what it needs, or
// the end of the handling (result set).
type move struct {
	to  step
	rec jobs.Record
	// fresh is a first delivery's job, not stored yet (rec is then
	// empty), for stepSubmit and stepWait.
	fresh *state.Job
	// status is a create's (or a find's) answer, for stepCreated.
	status provider.Status
	// err is a create's error, for stepFailed.
	err error
	// reason is why the job is lost, for stepLost.
	reason string
	// interrupted marks a doubt this handling's own call just left, for
	// stepInDoubt: what resolves it waits for the next delivery.
	interrupted bool

	out    events.Outcome
	result string
}

// decided is the move to the step the record needs.
func decided(rec jobs.Record) move { return move{to: stepDecide, rec: rec} }

// end ends the handling with the message's outcome and what it was.
func end(out events.Outcome, result string) move { return move{out: out, result: result} }

// maxSteps bounds one handling. The longest path takes six steps (a
// doubt looked up, submitted again, failed, in doubt again); a record
// that keeps moving under the handling is taken up by the next delivery.
const maxSteps = 16

// drive runs a submission's steps from m until one ends the handling.
func (s *Service) drive(ctx context.Context, in intake, m move, log zerolog.Logger) (events.Outcome, string) {
	for range maxSteps {
		if m.result != "" {
			return m.out, m.result
		}
		if m.to == stepDecide {
			m.to = nextStep(m.rec.Job, in.routeName, in.seq)
		}
		m = s.step(ctx, in, m, log)
	}
	log.Error().Msg("the submission's steps did not settle; its next delivery takes it from where it stands")
	return events.Later(schedule.Jitter(time.Second, schedule.RetryJitter, s.rnd)), "retry"
}

// step runs the step m names.
func (s *Service) step(ctx context.Context, in intake, m move, log zerolog.Logger) move {
	switch m.to {
	case stepReject:
		return s.taken(ctx, in, m.rec)
	case stepDuplicate:
		log.Debug().Uint64(logkey.OwnerSeq, m.rec.IntakeSeq).Msg("duplicate submission; the job exists")
		return end(events.Done(), "duplicate")
	case stepFinished:
		return s.rearm(ctx, m.rec, "duplicate", "publishing the job's events", log)
	case stepResume:
		return s.rearm(ctx, m.rec, "submitted", "arming the job's check", log)
	case stepCancel:
		return s.withdraw(ctx, m.rec, log)
	case stepInDoubt:
		return s.inDoubt(ctx, in, m.rec, m.interrupted, log)
	case stepCreated:
		return s.created(ctx, in, m.rec, m.status, log)
	case stepFailed:
		return s.submitFailed(ctx, in, m.rec, m.err, log)
	case stepLost:
		return s.giveUp(ctx, m.rec, m.reason, log)
	case stepWait:
		return s.enqueue(ctx, in, m, log)
	}
	return s.attempt(ctx, in, m, log)
}

// taken ends a submission whose id a job on another route has.
func (s *Service) taken(ctx context.Context, in intake, rec jobs.Record) move {
	if in.via != "" && rec.Routing != nil && rec.Routing.Via == in.via && rec.IntakeSeq != in.seq {
		// Another submission to the model route made the job first
		// (and routed it elsewhere): this one is a duplicate.
		return end(events.Done(), "duplicate")
	}
	return end(s.reject(ctx, in, rec.ID, &events.FieldError{Field: "id", Problem: fmt.Sprintf("already used by a job on route %s", rec.Route)}))
}

// rearm makes sure a created or finished job's events are out and its
// check armed (a redelivery after a crash), ending as result. A cancel
// recorded while its create was under way (its own message found no
// remote id to cancel) is handed to a cancel message of its own, so it
// waits out a pause, and retries, as any cancel does (cancel.go).
func (s *Service) rearm(ctx context.Context, rec jobs.Record, result, what string, log zerolog.Logger) move {
	if err := s.jobs.Resume(ctx, rec); err != nil {
		return end(s.retry(log, err, what))
	}
	if cancelPending(rec.Job) {
		if err := s.cancelAgain(ctx, rec.Job); err != nil {
			return end(s.retry(log, err, "sending the cancel requested during the create"))
		}
		log.Info().Msg("the cancel requested while the job was being created is sent")
		result = "submitted"
	}
	return end(events.Done(), result)
}

// withdraw ends a job whose cancel came before it was submitted.
func (s *Service) withdraw(ctx context.Context, rec jobs.Record, log zerolog.Logger) move {
	obs := state.Observation{State: state.Canceled, Reason: jobs.CanceledBeforeSubmit, Source: state.FromCancel, At: s.cfg.Now().UTC()}
	if _, err := s.jobs.End(ctx, rec, obs, jobs.Always); err != nil {
		return end(s.retry(log, err, "recording the cancel"))
	}
	return end(events.Done(), "canceled")
}
