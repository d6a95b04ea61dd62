package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/pollux-dev/pollux/pkg/state"
)

// Cancel requests: ingest's, for a cancel message, and the front door's,
// which records the request before it publishes the message, so that the
// cancel of a job that never reached the provider takes effect at once,
// whatever waits before the message in the route's intake (up to the
// intake consumer's 1,024 held submissions while the route is paused);
// and the front door's withdraw of a submission it answered 503 while
// its storing was in doubt, which must make no job no app holds an id
// for.

// CanceledBeforeSubmit is the reason of a job whose cancel came before it
// reached the provider.
const CanceledBeforeSubmit = "canceled before it was submitted"

// RequestCancel records a cancel request for job id on route, with its
// reason and who asked (events.Cancel.By; "" when not known), once. A job
// that has not reached the provider — no remote id, no create under way
// or in doubt — ends canceled in the same write (ended true); a create
// that starts meanwhile finds the request and makes no call
// (Intake.Attempt). A job created, or whose create is under way, keeps
// the request for its provider cancel. A terminal job is returned
// unchanged. state.ErrNotFound and ErrOtherRoute say it is not route's.
func (o *Owner) RequestCancel(ctx context.Context, route, id, reason, by string) (Record, bool, error) {
	r, err := o.store.get(ctx, id)
	switch {
	case err != nil:
		return Record{}, false, err
	case r.Route != route:
		return r, false, fmt.Errorf("job %s: %w %s", id, ErrOtherRoute, r.Route)
	case r.State.Terminal():
		return r, false, nil
	}
	ended := false
	r, err = o.outside(ctx, id, route, r, change{apply: func(cur *state.Job) bool {
		ended = false
		if cur.State.Terminal() {
			return false
		}
		now := o.now().UTC()
		wrote := cur.CancelRequestedAt.IsZero()
		if wrote {
			cur.CancelRequestedAt, cur.CancelReason, cur.CancelRequestedBy = now, reason, by
		}
		if cur.RemoteID == "" && !cur.SubmitInDoubt {
			ended = cur.Apply(state.Observation{State: state.Canceled, Reason: CanceledBeforeSubmit, Source: state.FromCancel, At: now}) != ""
		}
		return wrote || ended
	}})
	return r, ended, err
}

// Withdraw makes sure submission j — one its submitter answered as failed
// although the message may be stored, or may be later — makes no job:
// it creates j's record as ended, canceled for reason by by, so that
// ingest, taking the submission after, finds the record and makes
// nothing (created true; its canceled event published). When the record
// exists already — ingest took the submission first — it is returned
// unchanged (created false), for the caller to cancel it
// (RequestCancel): a job that has not reached the provider then ends at
// once. A record an earlier try of this withdraw created is found as
// created, its events published. j is the caller's to give: its id,
// route (a model route's, with Routing.Via), model and metadata.
func (o *Owner) Withdraw(ctx context.Context, j *state.Job, reason, by string) (Record, bool, error) {
	now := o.now().UTC()
	j.State, j.CreatedAt = state.Pending, cmp.Or(j.CreatedAt, now)
	j.CancelRequestedAt, j.CancelReason, j.CancelRequestedBy = now, reason, by
	j.Apply(state.Observation{State: state.Canceled, Reason: reason, Source: state.FromCancel, At: now})
	r, err := o.store.create(ctx, j)
	if errors.Is(err, state.ErrExists) {
		if r, err = o.store.get(ctx, j.ID); err != nil {
			return Record{}, false, err
		}
		if !withdrawn(r.Job) {
			return r, false, nil
		}
		// An earlier try's, whose events may not be out.
		return r, true, o.republish(ctx, r.Job)
	}
	if err != nil {
		return Record{}, false, err
	}
	if _, err := o.publish(ctx, r.Job); err != nil {
		return r, true, fmt.Errorf("publish the end of withdrawn job %s: %w", j.ID, err)
	}
	o.finished(nil, r.Job)
	return r, true, nil
}

// withdrawn reports whether j is a record Withdraw made: ended without
// ever being an intake message's (ingest's records carry theirs) or
// attempted.
func withdrawn(j *state.Job) bool {
	return j.State == state.Canceled && j.IntakeSeq == 0 && j.SubmitAttempts == 0 && j.RemoteID == ""
}
