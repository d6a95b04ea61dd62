package census

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

// The oldest unresolved job of a route is found in the events stream, not
// the checks: a check is replaced whenever its job changes state (and at
// every poll of a job expecting a webhook), so the oldest check message is
// only the job least recently changed. The events stream holds every
// job's first event (seq 1: it was submitted, or it ended at its submit)
// in the order jobs reached their provider, so the oldest unresolved job is
// the first job in that order whose record is not terminal.
//
// A cursor per route — the stream sequence of that job's first event, with
// the job and the event's time — is kept in the routes bucket under
// events.UnresolvedKey, shared by every process that takes the census. A
// take reads the cursor's job; only once it has ended does the take walk
// on, reading each later job's record at its first event. So each job's
// record is read about once after it ends, and a take that finds the
// oldest job still open costs two reads.

// walkBudget bounds one take's walk per route, in events read: a fleet
// whose census fell far behind (a first start on a long history) catches up
// over several takes, reporting meanwhile the age of the event it reached —
// more than the true age, never less. (A variable for the tests.)
var walkBudget = 20_000

// Unresolved is a route's cursor in the events stream.
type Unresolved struct {
	// Seq is the events-stream sequence to look from: the first event of
	// the oldest unresolved job, or, when Job is empty, the first event
	// not read yet.
	Seq uint64 `json:"seq"`
	// Job is the oldest unresolved job ("" when none is known yet).
	Job string `json:"job_id,omitempty"`
	// Since is the time of Job's first event, or, while the walk has not
	// reached the stream's end, of the event at Seq.
	Since time.Time `json:"since,omitzero"`
	// Behind reports a walk that stopped short of the stream's end.
	Behind bool `json:"behind,omitempty"`
}

// oldestUnresolved returns how long route's oldest unresolved job has been
// at its provider (0: none), advancing the shared cursor.
func oldestUnresolved(ctx context.Context, ns events.Namespace, res *events.Resources, get func(context.Context, string) (*state.Job, error), route string, now time.Time) (time.Duration, error) {
	key := events.UnresolvedKey(route)
	var u Unresolved
	var rev uint64
	switch e, err := res.Routes.Get(ctx, key); {
	case err == nil:
		if json.Unmarshal(e.Value(), &u) != nil {
			u = Unresolved{} // unreadable: walk again from the start
		}
		rev = e.Revision()
	case !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted):
		return 0, err
	}
	was := u
	if u.Job != "" {
		open, err := unresolved(ctx, get, u.Job)
		if err != nil {
			return 0, err
		}
		if open {
			return max(now.Sub(u.Since), 0), nil
		}
		u = Unresolved{Seq: u.Seq + 1}
	}
	u, err := walk(ctx, ns, res, get, route, u)
	if err != nil {
		return 0, err
	}
	if u != was {
		b, _ := json.Marshal(u)
		// Best effort: a process that may not write the bucket, or that
		// lost a race with another taking the census, has the same answer.
		if rev == 0 {
			_, _ = res.Routes.Create(ctx, key, b)
		} else {
			_, _ = res.Routes.Update(ctx, key, b, rev)
		}
	}
	if u.Job == "" && !u.Behind {
		return 0, nil
	}
	return max(now.Sub(u.Since), 0), nil
}

// walk reads route's events from u.Seq up to the first event of a job
// still unresolved, or to the stream's end, or walkBudget events.
func walk(ctx context.Context, ns events.Namespace, res *events.Resources, get func(context.Context, string) (*state.Job, error), route string, u Unresolved) (Unresolved, error) {
	info, err := res.Events.Info(ctx)
	if err != nil {
		return u, err
	}
	u.Seq = max(u.Seq, info.State.FirstSeq, 1) // older events may have aged out of the stream
	if u.Seq > info.State.LastSeq {
		return Unresolved{Seq: u.Seq}, nil
	}
	cons, err := res.Events.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{ns.Event(route, "*")},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    u.Seq,
	})
	if err != nil {
		return u, fmt.Errorf("read events: %w", err)
	}
	for read := 0; read < walkBudget; {
		batch, err := cons.FetchNoWait(min(500, walkBudget-read))
		if err != nil {
			return u, fmt.Errorf("read events: %w", err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			md, err := msg.Metadata()
			if err != nil {
				return u, err
			}
			ev, err := events.DecodeEvent(msg.Data())
			if err == nil && ev.Seq == 1 && ev.JobID != "" {
				open, err := unresolved(ctx, get, ev.JobID)
				if err != nil {
					return u, err
				}
				if open {
					return Unresolved{Seq: md.Sequence.Stream, Job: ev.JobID, Since: ev.Time}, nil
				}
			}
			u = Unresolved{Seq: md.Sequence.Stream + 1, Since: md.Timestamp, Behind: true}
		}
		if err := batch.Error(); err != nil {
			return u, fmt.Errorf("read events: %w", err)
		}
		if n == 0 {
			u.Behind, u.Since = false, time.Time{}
			return u, nil // the stream's end
		}
		read += n
	}
	return u, nil
}

// unresolved reports whether job id has a record that is not terminal.
func unresolved(ctx context.Context, get func(context.Context, string) (*state.Job, error), id string) (bool, error) {
	j, err := get(ctx, id)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return false, nil // ended long ago: its record has expired
	case err != nil:
		return false, fmt.Errorf("read job %s: %w", id, err)
	}
	return !j.State.Terminal(), nil
}
