package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
}

// currentCheck reads the job's check message.
func (o *Owner) currentCheck(ctx context.Context, route, id string) (seenCheck, error) {
	m, err := o.res.Checks.GetLastMsgForSubject(ctx, o.ns.Check(route, id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return seenCheck{}, nil
	}
	if err != nil {
		return seenCheck{}, fmt.Errorf("read check of job %s: %w", id, err)
	}
	s := seenCheck{seq: m.Sequence, published: m.Time}
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
// content does not count: a check of a job expecting a webhook (each of
// its polls publishes a new check), a check without poll state (its polls
// write the record), or a check whose first poll is not due yet.
func (s seenCheck) counts(now time.Time) (polls int, exact bool) {
	switch {
	case s.seq == 0 || s.check == nil || s.check.Poll == nil:
		return 0, true
	case s.check.Poll.Webhook, now.Before(s.check.Due.Add(-dueMargin)):
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

// publishCheck publishes c on route's check subject, expecting the
// subject's latest message to be at sequence last (0: none). The stream
// keeps one message per job subject, so a publish replaces the old check
// in the same step, and nothing can leave a job without a check in
// between; it is refused (ErrCheckMoved) unless the old one is still the
// latest.
func (o *Owner) publishCheck(ctx context.Context, route string, c events.Check, last uint64) error {
	b, err := encodeCheck(c)
	if err != nil {
		return err
	}
	_, err = o.js.Publish(ctx, o.ns.Check(route, c.JobID), b, jetstream.WithExpectLastSequencePerSubject(last))
	if events.IsWrongLastSequence(err) {
		return ErrCheckMoved
	}
	if err != nil {
		return fmt.Errorf("publish check of job %s: %w", c.JobID, err)
	}
	return nil
}

// arm publishes job j's first check, due at due; a job that has one keeps
// it.
func (o *Owner) arm(ctx context.Context, j *state.Job, due time.Time, published uint64) error {
	err := o.publishCheck(ctx, j.Route, newCheck(j, due, published), 0)
	if errors.Is(err, ErrCheckMoved) {
		return nil // armed already
	}
	return err
}

// checkTries bounds the attempts of replace and remove while other
// processes replace the same check.
const checkTries = 5

// replace puts c in place of the job's check as seen, reading the check
// again when it was replaced meanwhile; a job without a check gets c.
func (o *Owner) replace(ctx context.Context, route string, c events.Check, seen seenCheck) error {
	for range checkTries {
		err := o.publishCheck(ctx, route, c, seen.seq)
		if !errors.Is(err, ErrCheckMoved) {
			return err
		}
		if seen, err = o.currentCheck(ctx, route, c.JobID); err != nil {
			return err
		}
	}
	return fmt.Errorf("replace check of job %s: %w %d times", c.JobID, ErrCheckMoved, checkTries)
}

// remove removes the job's check message as seen, so polling stops at
// once.
//
// It deletes the message by its sequence. A purge by subject would be one
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
		err := o.res.Checks.DeleteMsg(ctx, seen.seq)
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
			return fmt.Errorf("remove check of job %s: %w", id, err)
		}
		// Refused: the message is gone (acked, replaced, removed) since it
		// was read, which JetStream reports as "no message found" or
		// "sequence not found" without a code nats.go exposes. Look again;
		// a refusal of the message still current is a real failure.
		was := seen.seq
		var rerr error
		if seen, rerr = o.currentCheck(ctx, route, id); rerr != nil {
			return rerr
		}
		if seen.seq == was {
			return fmt.Errorf("remove check of job %s: %w", id, err)
		}
	}
	return fmt.Errorf("remove check of job %s: replaced %d times meanwhile", id, checkTries)
}
