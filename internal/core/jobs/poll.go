package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

// The poller's verbs (the Polls view), one per step of a check delivery: Open reads it
// (and the record every verifyEvery quiet polls), Wait holds a first
// delivery until its poll is due (parking a far one), Postpone sends it
// back unpolled, Polled records a status call (Delivery.Fold made of it,
// with the poller's Decision), Settle ends the check of a finished job.

// ErrBadCheck marks a check message that cannot be used (an unexpected
// subject, an unreadable body): it is dropped.
var ErrBadCheck = errors.New("unusable check message")

// Open reads a delivery of a check message. It reads the job record when
// the check carries no poll state, and every verifyEvery quiet polls.
// ErrBadCheck means the message must be dropped; other errors are NATS
// failures worth a retry.
func (ps Polls) Open(ctx context.Context, msg jetstream.Msg) (*Delivery, error) {
	o := ps.o
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
//
// Each of its four ways out is one step below: polledQuiet (no write),
// then, after writePoll, polledAfterEnd (someone else ended the job),
// polledEnd (this poll ended it) or polledNext (the job goes on).
func (ps Polls) Polled(ctx context.Context, d *Delivery, f Fold, dec Decision) (Polled, error) {
	o := ps.o
	if f.Quiet && dec.End == nil && dec.HedgeBy == "" && d.rec.Job == nil {
		return o.polledQuiet(ctx, d, f, dec)
	}
	was, r, err := o.writePoll(ctx, d, f, dec)
	switch {
	case errors.Is(err, state.ErrNotFound):
		o.log.Warn().Str(logkey.JobID, d.JobID).Str(logkey.Route, d.Route).Msg("the job's record is gone; its check is dropped")
		return Polled{Outcome: events.Stop()}, nil
	case err != nil:
		return Polled{}, err
	case was != nil && was.State.Terminal():
		return o.polledAfterEnd(was, r), nil
	case r.State.Terminal():
		return o.polledEnd(ctx, d, was, r)
	}
	return o.polledNext(ctx, d, was, r, dec), nil
}

// polledQuiet records a poll that learned nothing without a write: the
// check goes back nak-delayed, its deliveries counting the poll, unless
// it must carry its count (a job expecting a webhook: every poll is in
// its check, so an outsider ending the job knows the count,
// seenCheck.counts) or is parked until a later poll; then it is replaced
// by one counting this poll.
func (o *Owner) polledQuiet(ctx context.Context, d *Delivery, f Fold, dec Decision) (Polled, error) {
	back := Polled{Outcome: events.Later(dec.Due.Sub(o.now()))}
	if !f.After.Webhook && !o.parks(dec.Due) {
		return back, nil
	}
	c := events.Check{V: events.Version, JobID: d.JobID, Due: dec.Due.UTC(), Poll: &f.After}
	err := o.put(ctx, d.Route, c, d.seq)
	switch {
	case err == nil:
		back = Polled{Outcome: events.Stop()}
	case errors.Is(err, ErrCheckMoved):
		return o.polledMoved(ctx, d, f)
	}
	return back, nil // a failed put: the check goes back as if quiet
}

// writePoll writes a poll that learned something (or ended a run of
// failures, or comes with a decision) into the record, after settling
// what earlier writers left in its outbox. was is the record before the
// write (nil when there was nothing to write).
func (o *Owner) writePoll(ctx context.Context, d *Delivery, f Fold, dec Decision) (was *state.Job, _ Record, _ error) {
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
		applyPoll(cur, f, dec)
		return nil
	})
	return was, r, err
}

// applyPoll applies a poll and the poller's decision to an unfinished
// job's record: the counters, the observation (or the failure), the end
// decided, a hedge, the next check time.
func applyPoll(cur *state.Job, f Fold, dec Decision) {
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
}

// polledAfterEnd ends the check of a job someone else ended while the
// poll ran; writePoll put its polls in the record.
func (o *Owner) polledAfterEnd(was *state.Job, r Record) Polled {
	o.finished(was, r.Job)
	return Polled{Outcome: events.Stop(), Job: r.Job}
}

// polledEnd publishes the end this poll wrote and ends the check. The
// end is a result in hand: no later write would publish it, and the check
// ends, so it goes out however long NATS is away; only a stop (ctx) keeps
// the check, for its next poll to publish the end.
func (o *Owner) polledEnd(ctx context.Context, d *Delivery, was *state.Job, r Record) (Polled, error) {
	log := o.log.With().Str(logkey.JobID, d.JobID).Str(logkey.Route, d.Route).Logger()
	err := o.keepRetrying(ctx, log, "publishing the job's end", func(ctx context.Context) error {
		_, err := o.publish(ctx, r.Job)
		return err
	})
	if err != nil {
		return Polled{}, err
	}
	o.finished(was, r.Job)
	return Polled{Outcome: events.Stop(), Job: r.Job, Finished: was != nil && !was.State.Terminal()}, nil
}

// polledNext publishes the events this poll wrote and replaces the check
// by one due at the next poll. A failed publish leaves the events in the
// record, for the next write; a failed replace keeps the old check, whose
// next delivery finds its state stale and writes again; a check replaced
// meanwhile is someone else's (the record has this poll).
func (o *Owner) polledNext(ctx context.Context, d *Delivery, was *state.Job, r Record, dec Decision) Polled {
	published := d.Live.Published
	if last, err := o.publish(ctx, r.Job); err != nil {
		o.log.Warn().Err(err).Str(logkey.JobID, d.JobID).Msg("publishing events failed; the next write publishes them")
	} else if last > 0 {
		published = last
	}
	o.finished(was, r.Job)
	out := events.Stop()
	if err := o.put(ctx, d.Route, newCheck(r.Job, dec.Due, published), d.seq); err != nil && !errors.Is(err, ErrCheckMoved) {
		o.log.Warn().Err(err).Str(logkey.JobID, d.JobID).Msg("replacing the check failed; keeping the old one")
		out = events.Later(dec.Due.Sub(o.now()))
	}
	return Polled{Outcome: out, Job: r.Job}
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
func (ps Polls) Settle(ctx context.Context, d *Delivery) (events.Outcome, error) {
	o := ps.o
	if d.gone {
		o.log.Warn().Str(logkey.JobID, d.JobID).Str(logkey.Route, d.Route).Msg("check for a job that does not exist; dropped")
		return events.Stop(), nil
	}
	if d.rec.Route != d.Route {
		o.log.Warn().Str(logkey.JobID, d.JobID).Str(logkey.Route, d.Route).Str(logkey.JobRoute, d.rec.Route).Msg("check on another route than its job's; dropped")
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
func (ps Polls) Postpone(ctx context.Context, d *Delivery, until time.Time) events.Outcome {
	o := ps.o
	wait := until.Sub(o.now())
	if d.Check.Poll == nil {
		return events.Later(wait)
	}
	c := events.Check{V: events.Version, JobID: d.JobID, Due: until.UTC(), Poll: d.Live}
	switch err := o.put(ctx, d.Route, c, d.seq); {
	case err == nil, errors.Is(err, ErrCheckMoved):
		return events.Stop()
	default:
		o.log.Warn().Err(err).Str(logkey.JobID, d.JobID).Msg("postponing the check failed; it will count one poll too many")
		return events.Later(wait)
	}
}

// Wait is the outcome of a delivery that must wait before it polls (a
// check's first delivery), due at due, wait from now: its check is parked
// when the wait is ParkAfter or more, else it goes back nak-delayed.
func (ps Polls) Wait(ctx context.Context, d *Delivery, due time.Time, wait time.Duration) events.Outcome {
	o := ps.o
	if d.Check.Poll == nil || !o.parksFor(wait) {
		return events.Later(wait)
	}
	c := events.Check{V: events.Version, JobID: d.JobID, Due: due.UTC(), Poll: d.Live}
	switch err := o.park(ctx, d.Route, c, d.seq); {
	case err == nil, errors.Is(err, ErrCheckMoved):
		return events.Stop()
	default:
		o.log.Warn().Err(err).Str(logkey.JobID, d.JobID).Msg("parking the check failed; it waits in the consumer")
		return events.Later(wait)
	}
}
