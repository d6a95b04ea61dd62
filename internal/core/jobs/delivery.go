package jobs

import (
	"time"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Delivery is one delivery of a job's check message, as the poller sees
// it: whether a poll is due, and the job's poll state as of now.
type Delivery struct {
	// Route and JobID name the job.
	Route, JobID string
	// N is the delivery's number, 1 for the check's first.
	N uint64
	// Check is the check message.
	Check *events.Check
	// Live is the job's poll state at this delivery: the check's, with
	// the polls the check made before this delivery. For a check without
	// poll state it comes from the record.
	Live *events.PollState

	seq uint64
	rec Record // the record, when this delivery read it
	// ended: the record is terminal (or gone); the check ends once its
	// polls are settled.
	ended, gone bool
}

// verifyEvery is how many quiet polls a job makes between two reads of
// its record: a safety net in case the job ended while its check
// stayed (every such write removes or settles the check; otherwise the
// provider's next answer would stop it).
const verifyEvery = 32

// quiet is how many polls the check made before this delivery that its
// content does not count: its deliveries after the first (which only
// waited), each one poll that learned nothing (a poll that learns
// something replaces the check).
func (d *Delivery) quiet() int {
	if d.N < 2 {
		return 0
	}
	return int(d.N - 2)
}

// Seq is the check message's stream sequence: which check this is.
func (d *Delivery) Seq() uint64 { return d.seq }

// Ended reports whether the job is terminal (or gone) and its check must
// end (see Settle).
func (d *Delivery) Ended() bool { return d.ended }

// Unsubmitted reports a check of a job the provider has not accepted yet
// (only a hand-made check can be): nothing to poll.
func (d *Delivery) Unsubmitted() bool { return d.Live != nil && d.Live.RemoteID == "" }

// Wait returns how long this delivery must wait before its poll; 0 when
// the poll is due. A check's first delivery waits until its due time; a
// check without poll state waits until the record's next check time.
func (d *Delivery) Wait(now time.Time) time.Duration {
	switch {
	case d.rec.Job != nil && d.Check.Poll == nil:
		due := d.Check.Due
		if d.rec.NextCheckAt.After(due) {
			due = d.rec.NextCheckAt
		}
		if w := due.Sub(now); w > 10*time.Millisecond {
			return w
		}
		return 0
	case d.N <= 1:
		return max(d.Check.Due.Sub(now), 0)
	}
	return 0
}

// Due is when this delivery's poll was due, as the check says: known for
// its first poll only (later ones were set by the nak of whoever held the
// check before).
func (d *Delivery) Due() (time.Time, bool) {
	if d.N == 2 || (d.Check.Poll == nil && d.rec.Job != nil) {
		due := d.Check.Due
		if d.rec.Job != nil && d.rec.NextCheckAt.After(due) {
			due = d.rec.NextCheckAt
		}
		return due, !due.IsZero()
	}
	return time.Time{}, false
}

// CreatedAt is when the job was accepted.
func (d *Delivery) CreatedAt() time.Time { return d.Live.CreatedAt }

// Call is what one status call returned.
type Call struct {
	// At is when the call was made.
	At time.Time
	// Status is the provider's answer; Err its failure.
	Status provider.Status
	Err    error
	// Prev is when the job was polled last, as well as the caller knows
	// (zero: not known beyond the poll state's).
	Prev time.Time
}

// Fold is what one status call made of a job's poll state.
type Fold struct {
	// After is the poll state after the call.
	After events.PollState
	// Obs is what a successful call observed (nil after a failure).
	Obs *state.Observation
	// Err is the call's failure.
	Err error
	// Changed reports that the job changed (state, progress, ...).
	Changed bool
	// Quiet reports a poll that needs no write: it succeeded, learned
	// nothing, and ended no run of failures.
	Quiet bool
}

// Fold applies a status call to the delivery's poll state: the counters,
// and the observation through the job's state machine. It is pure; the
// poller decides what follows from it (the next poll, or the job's end)
// and hands both to Polled.
func (d *Delivery) Fold(c Call) Fold {
	ps := *d.Live
	failing := ps.Errors > 0 || ps.NotFound > 0 || ps.Refused > 0
	prev := latest(c.Prev, ps.LastPolledAt)
	ps.Polls++
	ps.LastPolledAt = c.At
	f := Fold{Err: c.Err}
	if c.Err == nil {
		ps.Errors, ps.NotFound, ps.Refused = 0, 0, 0
		obs := c.Status.Observation
		obs.Source, obs.At = state.FromPoll, c.At
		if obs.State.Terminal() && obs.CompletedAt.IsZero() {
			// The provider gives no completion time: it ended between the
			// last poll that saw it unfinished and this one.
			since := latest(prev, ps.SubmittedAt, ps.CreatedAt)
			obs.CompletedAt = since.Add(c.At.Sub(since) / 2)
		}
		j := ps.Job(d.JobID, d.Route)
		raw, started, submitted := j.ProviderStatus, j.StartedAt, j.SubmittedAt
		f.Changed = j.Apply(obs) != ""
		ps.Learned(j)
		f.Obs = &obs
		f.Quiet = !f.Changed && !failing && j.ProviderStatus == raw && j.StartedAt.Equal(started) && j.SubmittedAt.Equal(submitted)
	} else {
		switch provider.ClassOf(c.Err) {
		case provider.NotFound:
			ps.NotFound++
			ps.Errors++
		case provider.Invalid:
			ps.Refused++
			ps.Errors++
		case provider.RateLimited, provider.Auth:
			// The route's pause paces these; they say nothing of the job.
		default:
			ps.Errors++
		}
	}
	switch {
	case f.Changed:
		ps.Unchanged = 0
	case c.Err == nil:
		ps.Unchanged++
	}
	f.After = ps
	return f
}

func latest(ts ...time.Time) time.Time {
	var l time.Time
	for _, t := range ts {
		if t.After(l) {
			l = t
		}
	}
	return l
}
