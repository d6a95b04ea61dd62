package jobs

import (
	"context"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Hold records that a job not yet submitted waits before its create, for
// what waitingFor says (state.Job.WaitingFor: its route is paused, a
// level's running slots are taken, others queue before it), and publishes
// its waiting event, so that lists show it and why. It writes nothing when
// the job waits for that already, or when it moved on — submitted, ended,
// a create under way or in doubt, a cancel requested (that submission ends
// it) — and returns the record either way.
func (o *Owner) Hold(ctx context.Context, r Record, waitingFor string) (Record, error) {
	return o.wait(ctx, r, func(cur *state.Job) bool {
		if cur.RemoteID != "" || cur.State.Terminal() || cur.SubmitInDoubt || !cur.CancelRequestedAt.IsZero() ||
			cur.WaitingFor == waitingFor {
			return false
		}
		cur.WaitingFor = waitingFor
		return true
	})
}

// wait writes apply's change to a job that has no check (it is not
// submitted), with a waiting event when what it waits for changed to
// something, and publishes the events. A publish that fails leaves them
// in the record, for the job's next write to publish.
func (o *Owner) wait(ctx context.Context, r Record, apply func(cur *state.Job) bool) (Record, error) {
	wrote := false
	r, err := o.store.mutate(ctx, r.ID, r, func(cur *state.Job) error {
		was := cur.WaitingFor
		if wrote = apply(cur); !wrote {
			return errNoWrite
		}
		// What earlier writers left goes out first (the waiting event of
		// a create whose publish failed).
		if err := o.settleOutbox(ctx, cur, 0); err != nil {
			return err
		}
		if cur.WaitingFor != "" && cur.WaitingFor != was {
			cur.Record(events.EventWaiting, o.now().UTC())
		}
		return nil
	})
	if err != nil || !wrote || len(r.Outbox) == 0 {
		return r, err
	}
	if _, err := o.publish(ctx, r.Job); err != nil {
		o.log.Warn().Err(err).Str("job_id", r.ID).Msg("publishing the waiting job's event failed; its next write publishes it")
	}
	return r, nil
}
