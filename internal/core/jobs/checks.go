package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// ErrCheckMoved is returned when a job's check is no longer the one the
// caller held: another process replaced or removed it.
var ErrCheckMoved = errors.New("the check message was replaced or removed meanwhile")

// seenCheck is a job's check message as read from the stream.
type seenCheck struct {
	check     *events.Check // nil when there is none, or it does not decode
	seq       uint64        // 0: the job has no check
	published time.Time
	// parked: the check waits parked (events.Namespace.Parked), as its
	// poller left it; a check its poller parked may stay on the check
	// subject too until that poller ends its delivery.
	parked bool
}

// currentCheck reads the job's check message: the latest message on its
// check and parked subjects, as the stream's leader has it (a replica a
// write behind would have the owner act on a check already replaced).
func (o *Owner) currentCheck(ctx context.Context, route, id string) (seenCheck, error) {
	m, found, err := leaderMsg(ctx, o.js, o.ns.ChecksStream(), msgGet{LastBySubject: o.ns.CheckOrParked(route, id)})
	if err != nil {
		return seenCheck{}, fmt.Errorf("read check of job %s: %w", id, err)
	}
	if !found {
		return seenCheck{}, nil
	}
	s := seenCheck{seq: m.Seq, published: m.Time, parked: o.ns.IsParked(m.Subject)}
	s.check, _ = events.DecodeCheck(m.Data) // unreadable: still removable by its sequence
	return s, nil
}

// dueMargin is how far before a check's first poll is due an outsider
// still takes it for unpolled: clocks of different hosts differ.
const dueMargin = time.Second

// counts reports whether the check's content counts every poll the check
// made as of now, and that count. Only the process holding a delivery
// sees the polls a check made since it was published (they are its
// deliveries), so a writer that removes or replaces a check it does not
// hold can take its count only when the check has made no poll the
// content does not count: a parked check (its poller parked it with every
// poll counted), a check of a job expecting a webhook (each of its polls
// publishes a new check), a check without poll state (its polls write the
// record), or a check whose first poll is not due yet.
func (s seenCheck) counts(now time.Time) (polls int, exact bool) {
	switch {
	case s.seq == 0 || s.check == nil || s.check.Poll == nil:
		return 0, true
	case s.parked, s.check.Poll.Webhook, now.Before(s.check.Due.Add(-dueMargin)):
		return s.check.Poll.Polls, true
	}
	return s.check.Poll.Polls, false
}

// newCheck is the check of record r due at due, carrying its poll state
// with the events known published up to published.
func newCheck(j *state.Job, due time.Time, published uint64) events.Check {
	ps := events.PollStateOf(j)
	ps.Published = published
	return events.Check{V: events.Version, JobID: j.ID, Due: due.UTC(), Poll: ps}
}

// maxCheckBytes keeps a check message within the checks stream's limit
// (events.MaxCheckBytes) with room for its headers.
const maxCheckBytes = events.MaxCheckBytes - 512

// encodeCheck encodes a check. A poll state too big for a check (a
// provider reference of kilobytes) is left out: the poller then reads the
// job record at every delivery.
func encodeCheck(c events.Check) ([]byte, error) {
	b, err := json.Marshal(c)
	if err == nil && len(b) > maxCheckBytes {
		c.Poll = nil
		b, err = json.Marshal(c)
	}
	if err != nil {
		return nil, fmt.Errorf("encode check of job %s: %w", c.JobID, err)
	}
	return b, nil
}

// EncodeCheck is job j's check message due at due, as the owner publishes
// it (for tools that write checks in bulk, such as the bench).
func EncodeCheck(j *state.Job, due time.Time) ([]byte, error) {
	return encodeCheck(newCheck(j, due, j.EventSeq))
}

// publishCheck publishes c on route's check subject, expecting the latest
// message on the job's check and parked subjects to be at sequence last
// (0: none), and returns the new check's sequence. The stream keeps one
// message per subject, so a publish replaces the old check (on the check
// subject) in the same step, and nothing can leave a job without a check
// in between; it is refused (ErrCheckMoved) unless the old one is still
// the latest. A parked check it replaces stays until removed (replace).
func (o *Owner) publishCheck(ctx context.Context, route string, c events.Check, last uint64) (uint64, error) {
	b, err := encodeCheck(c)
	if err != nil {
		return 0, err
	}
	ack, err := o.js.Publish(ctx, o.ns.Check(route, c.JobID), b,
		jetstream.WithExpectLastSequenceForSubject(last, o.ns.CheckOrParked(route, c.JobID)))
	if events.IsWrongLastSequence(err) {
		return 0, ErrCheckMoved
	}
	if err != nil {
		return 0, fmt.Errorf("publish check of job %s: %w", c.JobID, err)
	}
	return ack.Sequence, nil
}

// park publishes c as job c.JobID's parked check, in place of the check
// its caller holds at sequence last (ErrCheckMoved: that is no longer the
// job's check). It waits as a message schedule, which costs the server
// nothing per tick, and fires events.ParkedLead before c.Due onto the
// job's check subject, where its first delivery waits until c.Due
// (nak-delayed, to the millisecond). The held check stays on the check
// subject until its holder ends the delivery; whoever reads the job's
// check meanwhile sees the parked one, the latest.
func (o *Owner) park(ctx context.Context, route string, c events.Check, last uint64) error {
	b, err := encodeCheck(c)
	if err != nil {
		return err
	}
	m := nats.NewMsg(o.ns.Parked(route, c.JobID))
	m.Data = b
	m.Header.Set(jetstream.ScheduleHeader, events.ScheduleAt(c.Due.Add(-events.ParkedLead)))
	_, err = o.js.PublishMsg(ctx, m, jetstream.WithScheduleTarget(o.ns.Check(route, c.JobID)),
		jetstream.WithExpectLastSequenceForSubject(last, o.ns.CheckOrParked(route, c.JobID)))
	if events.IsWrongLastSequence(err) {
		return ErrCheckMoved
	}
	if err != nil {
		return fmt.Errorf("park check of job %s: %w", c.JobID, err)
	}
	return nil
}

// parks reports whether a check due at due waits parked: only its
// holder parks a check (put, Wait), so no poll of a parked check is under
// way.
func (o *Owner) parks(due time.Time) bool { return o.parksFor(due.Sub(o.now())) }

// parksFor reports whether a check waits parked for a wait this long.
func (o *Owner) parksFor(wait time.Duration) bool { return o.parkAfter > 0 && wait >= o.parkAfter }

// put publishes c in place of the check its caller holds (at sequence
// last): parked when its poll is ParkAfter or more away, else on the check
// subject. Either way the caller's delivery then ends (events.Stop).
func (o *Owner) put(ctx context.Context, route string, c events.Check, last uint64) error {
	if o.parks(c.Due) {
		return o.park(ctx, route, c, last)
	}
	_, err := o.publishCheck(ctx, route, c, last)
	return err
}

// arm publishes job j's first check, due at due; a job that has one keeps
// it.
func (o *Owner) arm(ctx context.Context, j *state.Job, due time.Time, published uint64) error {
	_, err := o.publishCheck(ctx, j.Route, newCheck(j, due, published), 0)
	if errors.Is(err, ErrCheckMoved) {
		return nil // armed already
	}
	return err
}

// checkTries bounds the attempts of replace and remove while other
// processes replace the same check.
const checkTries = 5

// replace puts c in place of the job's check as seen, reading the check
// again when it was replaced meanwhile; a job without a check gets c. A
// parked check is replaced on the check subject (only a poll's holder
// parks), and then removed; when it fired meanwhile, what it fired
// replaced c, and c replaces that in turn.
func (o *Owner) replace(ctx context.Context, route string, c events.Check, seen seenCheck) error {
	for range checkTries {
		mine, err := o.publishCheck(ctx, route, c, seen.seq)
		switch {
		case err == nil && !seen.parked:
			return nil
		case err == nil:
			gone, err := o.deleteCheck(ctx, seen.seq)
			if err != nil || !gone {
				return err
			}
			if seen, err = o.currentCheck(ctx, route, c.JobID); err != nil || seen.seq == mine {
				return err
			}
			continue
		case !errors.Is(err, ErrCheckMoved):
			return err
		}
		if seen, err = o.currentCheck(ctx, route, c.JobID); err != nil {
			return err
		}
	}
	return fmt.Errorf("replace check of job %s: %w %d times", c.JobID, ErrCheckMoved, checkTries)
}

// deleteCheck deletes the check message at seq, reporting whether it was
// gone already (acked, replaced, fired, removed since it was read).
func (o *Owner) deleteCheck(ctx context.Context, seq uint64) (gone bool, err error) {
	err = o.res.Checks.DeleteMsg(ctx, seq)
	switch {
	case err == nil:
		return false, nil
	case !errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful):
		return false, err
	}
	// JetStream reports a message no longer there as "no message found"
	// or "sequence not found", without a code nats.go exposes: a refusal
	// of a message still there is a real failure.
	if _, found, gerr := leaderMsg(ctx, o.js, o.ns.ChecksStream(), msgGet{Seq: seq}); gerr != nil || found {
		return false, fmt.Errorf("delete check message %d: %w", seq, err)
	}
	return true, nil
}

// remove removes the job's check message as seen, so polling stops at
// once. A parked check's holder may have left the check it parked on
// the check subject: that goes too.
//
// It deletes messages by their sequence. A purge by subject would be one
// call, but on a work-queue stream it corrupts the state of a consumer
// with a wider filter: other jobs' checks that wait nak-delayed are
// dropped from the consumer while staying in the stream, never to be
// delivered again (nats-server 2.15.2, measured: 19 to 170 of 300 waiting
// checks lost; see nats-server#5727). TestRemoveKeepsOtherChecks guards
// this.
func (o *Owner) remove(ctx context.Context, route, id string, seen seenCheck) error {
	for range checkTries {
		if seen.seq == 0 {
			return nil // not armed
		}
		gone, err := o.deleteCheck(ctx, seen.seq)
		if err != nil {
			return fmt.Errorf("remove check of job %s: %w", id, err)
		}
		if !gone {
			if seen.parked {
				return o.removeParkedLeftover(ctx, route, id, seen.seq)
			}
			return nil
		}
		// Gone since it was read (acked, replaced, fired): look again.
		if seen, err = o.currentCheck(ctx, route, id); err != nil {
			return err
		}
	}
	return fmt.Errorf("remove check of job %s: replaced %d times meanwhile", id, checkTries)
}

// removeParkedLeftover deletes the check a poller parked (older than the
// parked one at parked) if it is still on the check subject.
func (o *Owner) removeParkedLeftover(ctx context.Context, route, id string, parked uint64) error {
	m, found, err := leaderMsg(ctx, o.js, o.ns.ChecksStream(), msgGet{LastBySubject: o.ns.Check(route, id)})
	switch {
	case err != nil:
		return fmt.Errorf("remove check of job %s: %w", id, err)
	case !found:
		return nil
	case m.Seq > parked:
		return nil // not the parker's: newer than the parked check
	}
	if _, err := o.deleteCheck(ctx, m.Seq); err != nil {
		return fmt.Errorf("remove check of job %s: %w", id, err)
	}
	return nil
}
