package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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

// ErrBadCheck marks a check message that cannot be used (an unexpected
// subject, an unreadable body): it is dropped.
var ErrBadCheck = errors.New("unusable check message")

// Open reads a delivery of a check message. It reads the job record when
// the check carries no poll state, and every verifyEvery quiet polls.
// ErrBadCheck means the message must be dropped; other errors are NATS
// failures worth a retry.
func (o *Owner) Open(ctx context.Context, msg jetstream.Msg) (*Delivery, error) {
	route, id, err := o.ns.ParseCheck(msg.Subject())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCheck, err)
	}
	md, err := msg.Metadata()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCheck, err)
	}
	chk, err := events.DecodeCheck(msg.Data())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCheck, err)
	}
	d := &Delivery{Route: route, JobID: id, N: md.NumDelivered, Check: chk, seq: md.Sequence.Stream}
	if chk.Poll == nil {
		return d, o.load(ctx, d)
	}
	live := *chk.Poll
	quiet := d.quiet()
	live.Polls += quiet
	live.Unchanged += quiet
	// Every verifyEvery quiet polls (counted by the check's content and
	// its deliveries: a parked check's quiet polls are in its content),
	// and for a check that says its job is finished (Pollux never
	// publishes one: made by hand), the record decides.
	if d.N > 1 && ((live.Unchanged > 0 && live.Unchanged%verifyEvery == 0) || live.State.Terminal()) {
		if err := o.load(ctx, d); err != nil {
			return nil, err
		}
		if !d.ended && live.State.Terminal() {
			// The record, unfinished, is right: poll from its state.
			rs := events.PollStateOf(d.rec.Job)
			rs.Polls = max(rs.Polls, live.Polls)
			live = *rs
		}
		if !d.ended {
			d.rec = Record{} // only a check, not the record, goes on
		}
	}
	d.Live = &live
	return d, nil
}

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

// load reads the record for d: a check without poll state takes its
// state from it.
func (o *Owner) load(ctx context.Context, d *Delivery) error {
	r, err := o.store.get(ctx, d.JobID)
	switch {
	case errors.Is(err, state.ErrNotFound):
		d.ended, d.gone = true, true
		return nil
	case err != nil:
		return err
	}
	d.rec = r
	d.ended = r.State.Terminal() || r.Route != d.Route
	if d.Live == nil {
		d.Live = events.PollStateOf(r.Job)
	}
	return nil
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

// Decision is what the poller makes of a fold.
type Decision struct {
	// End ends the job with this observation (lost, failed, expired).
	End *state.Observation
	// Due is when the next poll is due (unless the job ends).
	Due time.Time
	// HedgeBy and HedgeTo mark a job a model route chose the route of as
	// hedged by that job on that route, unless it is hedged already (see
	// package poller).
	HedgeBy, HedgeTo string
}

// Polled is what Polled did.
type Polled struct {
	// Outcome settles the delivery.
	Outcome events.Outcome
	// Job is the record when the poll wrote it (nil: a quiet poll).
	Job *state.Job
	// Finished reports that this poll ended the job.
	Finished bool
}

// Polled records a status call: a quiet poll of a job touches no record
// (its check goes back, or, for a job expecting a webhook, is replaced by
// one counting it); any other writes the record, publishes its events and
// replaces the check, or ends it when the job is terminal. An error is a
// failure to write the record, worth a retry after a while.
func (o *Owner) Polled(ctx context.Context, d *Delivery, f Fold, dec Decision) (Polled, error) {
	now := o.now()
	if f.Quiet && dec.End == nil && dec.HedgeBy == "" && d.rec.Job == nil {
		if !f.After.Webhook && !o.parks(dec.Due) {
			return Polled{Outcome: events.Later(dec.Due.Sub(now))}, nil
		}
		// Every poll of a job expecting a webhook is in its check, so an
		// outsider ending the job knows the count (seenCheck.counts); a
		// check parked until a later poll carries its count too.
		c := events.Check{V: events.Version, JobID: d.JobID, Due: dec.Due.UTC(), Poll: &f.After}
		switch err := o.put(ctx, d.Route, c, d.seq); {
		case err == nil:
			return Polled{Outcome: events.Stop()}, nil
		case errors.Is(err, ErrCheckMoved):
			return o.polledMoved(ctx, d, f)
		default:
			return Polled{Outcome: events.Later(dec.Due.Sub(now))}, nil
		}
	}

	var was *state.Job
	known := d.Live.Published
	r, err := o.store.mutate(ctx, d.JobID, d.rec, func(cur *state.Job) error {
		was = cloneJob(cur)
		// First the events earlier writers left: one that ended the job
		// may have died before publishing the end, and this check, about
		// to end, would be the last to look.
		if err := o.settleOutbox(ctx, cur, known); err != nil {
			return err
		}
		if cur.State.Terminal() {
			// Ended by someone else (a cancel, a webhook) while this check
			// was out: its polls go in, and it ends.
			return settlePolls(cur, f.After.Polls)
		}
		cur.Polls = max(cur.Polls, f.After.Polls)
		cur.Unchanged, cur.Errors, cur.NotFound, cur.Refused = f.After.Unchanged, f.After.Errors, f.After.NotFound, f.After.Refused
		cur.LastPolledAt = f.After.LastPolledAt
		if f.Obs != nil {
			cur.LastError = ""
			cur.Apply(*f.Obs)
		} else {
			cur.LastError = provider.MessageOf(f.Err)
		}
		if dec.End != nil && !cur.State.Terminal() {
			cur.Apply(*dec.End)
		}
		if dec.HedgeBy != "" && cur.Routing != nil && cur.Routing.HedgedBy == "" && !cur.State.Terminal() {
			rt := *cur.Routing
			rt.HedgedBy, rt.HedgeTo = dec.HedgeBy, dec.HedgeTo
			cur.Routing = &rt
		}
		if !cur.State.Terminal() {
			cur.NextCheckAt = dec.Due.UTC()
		}
		return nil
	})
	switch {
	case errors.Is(err, state.ErrNotFound):
		o.log.Warn().Str("job_id", d.JobID).Str("route", d.Route).Msg("the job's record is gone; its check is dropped")
		return Polled{Outcome: events.Stop()}, nil
	case err != nil:
		return Polled{}, err
	}
	if was != nil && was.State.Terminal() {
		o.finished(was, r.Job)
		return Polled{Outcome: events.Stop(), Job: r.Job}, nil
	}
	published := known
	if r.State.Terminal() {
		// The end is a result in hand: no later write would publish it,
		// and the check ends, so it goes out however long NATS is away.
		log := o.log.With().Str("job_id", d.JobID).Str("route", d.Route).Logger()
		if err := o.keepRetrying(ctx, log, "publishing the job's end", func(ctx context.Context) error {
			_, err := o.publish(ctx, r.Job)
			return err
		}); err != nil {
			return Polled{}, err // stopping: the check comes back, and its next poll publishes the end
		}
		o.finished(was, r.Job)
		return Polled{Outcome: events.Stop(), Job: r.Job, Finished: was != nil && !was.State.Terminal()}, nil
	}
	if last, err := o.publish(ctx, r.Job); err != nil {
		o.log.Warn().Err(err).Str("job_id", d.JobID).Msg("publishing events failed; the next write publishes them")
	} else if last > 0 {
		published = last
	}
	o.finished(was, r.Job)
	switch err := o.put(ctx, d.Route, newCheck(r.Job, dec.Due, published), d.seq); {
	case err == nil:
		return Polled{Outcome: events.Stop(), Job: r.Job}, nil
	case errors.Is(err, ErrCheckMoved):
		return Polled{Outcome: events.Stop(), Job: r.Job}, nil // the record has this poll; the new check is someone else's
	default:
		// The old check stays; its next delivery finds its state stale
		// and writes again.
		o.log.Warn().Err(err).Str("job_id", d.JobID).Msg("replacing the check failed; keeping the old one")
		return Polled{Outcome: events.Later(dec.Due.Sub(now)), Job: r.Job}, nil
	}
}

// polledMoved records a quiet poll whose check another process replaced
// or removed while the call ran: the poll goes into the record.
func (o *Owner) polledMoved(ctx context.Context, d *Delivery, f Fold) (Polled, error) {
	var was *state.Job
	r, err := o.store.mutate(ctx, d.JobID, Record{}, func(cur *state.Job) error {
		was = cloneJob(cur)
		if cur.Polls >= f.After.Polls {
			return errNoWrite
		}
		cur.Polls = f.After.Polls
		cur.PollsOpen = false
		return nil
	})
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return Polled{}, err
	}
	if r.Job != nil {
		o.finished(was, r.Job)
	}
	return Polled{Outcome: events.Stop()}, nil
}

// settlePolls brings a terminal job's poll count to polls, the count of a
// check that ends now, and closes it.
func settlePolls(cur *state.Job, polls int) error {
	if cur.Polls >= polls && !cur.PollsOpen {
		return errNoWrite
	}
	cur.Polls = max(cur.Polls, polls)
	cur.PollsOpen = false
	return nil
}

// Settle ends the check of a job that is terminal or gone (Ended): its
// polls go into the record, events a dead writer left unpublished are
// published, and the delivery ends.
func (o *Owner) Settle(ctx context.Context, d *Delivery) (events.Outcome, error) {
	if d.gone {
		o.log.Warn().Str("job_id", d.JobID).Str("route", d.Route).Msg("check for a job that does not exist; dropped")
		return events.Stop(), nil
	}
	if d.rec.Route != d.Route {
		o.log.Warn().Str("job_id", d.JobID).Str("route", d.Route).Str("job_route", d.rec.Route).Msg("check on another route than its job's; dropped")
		return events.Stop(), nil
	}
	if err := o.republish(ctx, d.rec.Job); err != nil {
		return events.Outcome{}, err
	}
	polls := d.rec.Polls
	if d.Live != nil {
		polls = d.Live.Polls
	}
	was := d.rec.Job
	r, err := o.store.mutate(ctx, d.JobID, d.rec, func(cur *state.Job) error {
		was = cloneJob(cur)
		return settlePolls(cur, polls)
	})
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return events.Outcome{}, err
	}
	if r.Job != nil {
		o.finished(was, r.Job)
	}
	return events.Stop(), nil
}

// Postpone sends the delivery's check back until until without polling
// (a paused route, a busy budget). A check with poll state is replaced by
// one carrying the polls counted so far, since its delivery count would
// count this delivery as a poll.
func (o *Owner) Postpone(ctx context.Context, d *Delivery, until time.Time) events.Outcome {
	wait := until.Sub(o.now())
	if d.Check.Poll == nil {
		return events.Later(wait)
	}
	c := events.Check{V: events.Version, JobID: d.JobID, Due: until.UTC(), Poll: d.Live}
	switch err := o.put(ctx, d.Route, c, d.seq); {
	case err == nil, errors.Is(err, ErrCheckMoved):
		return events.Stop()
	default:
		o.log.Warn().Err(err).Str("job_id", d.JobID).Msg("postponing the check failed; it will count one poll too many")
		return events.Later(wait)
	}
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
