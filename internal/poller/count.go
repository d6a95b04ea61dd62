package poller

import (
	"time"

	"github.com/pollux-dev/pollux/internal/lifecycle"
	"github.com/pollux-dev/pollux/internal/route"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Learned returns the learned durations of a route, model and configuration
// key (see package learn); nil means none are learned.
type Learned func(route, model, configKey string) (total, run *schedule.Dist)

// maxReplay bounds CountPolls' replay of a schedule.
const maxReplay = 100_000

// CountPolls estimates a job's polls so far from its check as a writer
// read it before ending or replacing it (a webhook, a cancel, a callback):
// the polls since the check's poll context was written are counted only by
// the check's deliveries (see events.Check), which go with it. The
// estimate is the context's count plus the polls the route's schedule
// makes from the check's not-before until now, replayed without jitter
// (the jitter averages out; the last poll may be one off). ok is false
// when there is no check with a poll context; the writer then keeps the
// record's counts.
func CountPolls(r *route.Route, learned Learned, seen *lifecycle.Seen, now time.Time) (polls, unchanged int, ok bool) {
	if seen == nil || seen.Check == nil || seen.Check.Job == nil {
		return 0, 0, false
	}
	j := *seen.Check.Job
	j.Route = r.Name
	t := seen.Check.NotBefore
	if t.IsZero() {
		t = seen.Published
	}
	for n := 0; !t.After(now) && n < maxReplay; n++ {
		j.Polls++
		j.Unchanged++
		d := r.Policy.Next(scheduleOf(&j, learned, t), noJitter)
		if d <= 0 {
			break // at the deadline: that poll ended it
		}
		t = t.Add(d)
	}
	return j.Polls, j.Unchanged, true
}

// scheduleOf is the schedule's view of job j at now, phase and learned
// durations included.
func scheduleOf(j *state.Job, learned Learned, now time.Time) schedule.Job {
	sj := Schedulable(j, now)
	switch j.State {
	case state.Queued:
		sj.Phase = schedule.PhaseQueued
	case state.Running:
		sj.Phase = schedule.PhaseRunning
	default:
		sj.Phase = schedule.PhaseUnknown
	}
	if learned != nil {
		sj.Learned, sj.LearnedRun = learned(j.Route, j.Model, j.ConfigKey)
	}
	return sj
}
