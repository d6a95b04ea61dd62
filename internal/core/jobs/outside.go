package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/state"
)

// change is a write to a job by anyone but its check's poller: ingest
// (a failed submission, a cancel), the webhook applier, a callback.
type change struct {
	// apply changes the record and reports whether it changed it
	// (false: nothing to write).
	apply func(cur *state.Job) bool
	// sooner, when set and the job goes on, brings its next poll forward
	// to this time.
	sooner time.Time
	// seen is the job's check when the caller read it already.
	seen *seenCheck
}

// outside makes a change to job id (from r when set) and settles what it
// means for the job's check, which its writer does not hold: when the
// change ends the job, the check's polls go into the record and the check
// is removed, so polling stops at once; when it brings the next poll
// forward, the check is replaced by one due then. Both need the check's
// count of polls (seenCheck.counts): a check that made polls only its
// holder can count is left to the poller, which settles it at its next
// delivery (PollsOpen) — the poll it then makes confirms the change.
// Events the change causes are published.
func (o *Owner) outside(ctx context.Context, id, route string, r Record, c change) (Record, error) {
	var seen seenCheck
	if c.seen != nil {
		seen = *c.seen
	} else {
		var err error
		if seen, err = o.currentCheck(ctx, route, id); err != nil {
			return Record{}, err
		}
	}
	now := o.now()
	polls, exact := seen.counts(now)
	known := uint64(0)
	if seen.check != nil && seen.check.Poll != nil {
		known = seen.check.Poll.Published
	}
	var was *state.Job
	wrote := false
	r, err := o.store.mutate(ctx, id, r, func(cur *state.Job) error {
		was, wrote = cloneJob(cur), false
		// The events earlier writers left go out before this change is
		// made (a change's own events go out after its write): one that
		// ended the job may have died before publishing the end, and the
		// check this change removes would be the last to look.
		if err := o.settleOutbox(ctx, cur, known); err != nil {
			return err
		}
		if !c.apply(cur) {
			return errNoWrite
		}
		if cur.State.Terminal() && !was.State.Terminal() {
			cur.Polls = max(cur.Polls, polls)
			cur.PollsOpen = !exact && seen.seq != 0
		}
		wrote = true
		return nil
	})
	if err != nil {
		return Record{}, err
	}
	published := uint64(0)
	if wrote {
		if published, err = o.publish(ctx, r.Job); err != nil {
			if r.State.Terminal() {
				// No later write would publish the end: the caller's retry
				// finds the job ended and publishes it before the check
				// goes (below).
				o.finished(was, r.Job)
				return Record{}, fmt.Errorf("publish the end of job %s: %w", id, err)
			}
			// The events are in the record; the next write publishes them.
			o.log.Warn().Err(err).Str(logkey.JobID, id).Msg("publishing events failed; the next write publishes them")
		}
		o.finished(was, r.Job)
	}
	switch {
	case r.State.Terminal():
		if r.PollsOpen {
			return r, nil // the poller settles the check
		}
		// Idempotent: a retried change that wrote nothing removes the
		// check all the same.
		return r, o.remove(ctx, route, id, seen)
	case !c.sooner.IsZero() && exact && seen.seq != 0:
		chk := newCheck(r.Job, c.sooner, max(published, known))
		chk.Poll.Polls = max(chk.Poll.Polls, polls)
		return r, o.replace(ctx, route, chk, seen)
	}
	return r, nil
}
