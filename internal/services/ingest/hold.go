package ingest

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
)

// Held jobs. While a route is paused its intake is still taken: a
// submission is stored as a job waiting for the pause's end (pending,
// its waiting_for naming the pause, its waiting event published), so
// that lists show it, the census counts it and a cancel ends it at once,
// without a create. Its intake message goes back until the pause ends
// (Hold: an operator's pause is looked at again every
// route.OperatorRecheck), then it is submitted as a redelivery is. The
// jobs' owner serializes a cancel and the start of a create on the job's
// record: an attempt marked after a cancel request finds it and makes no
// call (jobs.Intake.Attempt), so a cancel of a held job wins against a
// resume racing it.
//
// A route's intake consumer has at most 1024 messages out
// (events.Namespace.IngestConsumerConfig): beyond as many held
// submissions, later intake — submissions and cancels — waits in the
// intake stream, counted there by the census, until the pause ends.

// paused returns how long calls on r wait and why ("" when they do not).
func (s *Service) paused(r *route.Route) (time.Duration, string) {
	return s.gate[r.Name].Hold()
}

// hold is the held step: a job not yet submitted waits for its route's
// pause to end (d, why). Its record says so — a first delivery's job is
// stored waiting, the one write of its delivery — and its message comes
// back then. A job that moved on meanwhile (a cancel ended it) is taken
// from where it stands.
func (s *Service) hold(ctx context.Context, in intake, m move, d time.Duration, why string, log zerolog.Logger) move {
	var after jobs.Record
	var err error
	if m.fresh != nil {
		m.fresh.WaitingFor = why
		var created bool
		if after, created, err = s.jobs.Accept(ctx, m.fresh); err == nil && !created {
			return decided(after) // stored already: its record says what is next
		}
	} else {
		after, err = s.jobs.Hold(ctx, m.rec, why)
	}
	if err != nil {
		return end(s.retry(log, err, "recording the job held"))
	}
	if nextStep(after.Job, in.routeName, in.seq) != stepSubmit {
		return decided(after)
	}
	log.Debug().Str(logkey.WaitingFor, why).Dur(logkey.RetryIn, d).Msg("held: the route is paused")
	return end(events.Later(d), "held")
}
