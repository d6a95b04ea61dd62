package jobs

import (
	"context"
	"fmt"

	"github.com/pollux-dev/pollux/pkg/state"
)

// Cancel requests: ingest's, for a cancel message, and the front door's,
// which records the request before it publishes the message, so that the
// cancel of a job that never reached the provider takes effect at once,
// whatever waits before the message in the route's intake (up to the
// intake consumer's 1,024 held submissions while the route is paused).

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
