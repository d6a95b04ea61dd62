package jobs

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/state"
)

// The webhook receiver's verbs (the Webhooks view): ByRemote finds the job a delivery names
// by its remote id only, Webhook applies a verified delivery, Hint brings
// a poll forward for an unsigned callback. Both write from outside the
// job's check (outside.go).

// Why a webhook delivery or a callback is not applied.
var (
	// ErrNotReady: the job cannot take the delivery yet. Its record does
	// not know its remote id (the create's answer is being recorded: a
	// provider may call back before it answers), or does not exist yet
	// (a replica behind), or the job is submitted but not armed yet.
	ErrNotReady = errors.New("the job cannot take the delivery yet")
	// ErrMismatch: the delivery is about another job than the one its
	// URL names (another route, another remote id).
	ErrMismatch = errors.New("the delivery does not match the job")
)

// Notice is a verified webhook delivery about a job.
type Notice struct {
	// Route and JobID name the job (the delivery's URL does).
	Route, JobID string
	// DeliveryID is the provider's id of the delivery: one applied twice
	// changes the job once.
	DeliveryID string
	// RemoteID is the remote job the delivery is about.
	RemoteID string
	// Obs is what the delivery says.
	Obs state.Observation
	// Unarmed applies a delivery that ends the job although the job has
	// no check: the caller waited long enough for one.
	Unarmed bool
}

// Applied is what a delivery did.
type Applied struct {
	// Job is the job's record after it.
	Job *state.Job
	// Changed reports that it changed the job's state or progress.
	Changed bool
}

// Webhook applies a verified delivery to its job. A delivery that ends
// the job stops its polling at once (see outside). ErrNotReady asks for a
// retry later; ErrMismatch and state.ErrNotFound mean it never applies.
func (wh Webhooks) Webhook(ctx context.Context, n Notice) (Applied, error) {
	o := wh.o
	r, seen, err := o.ready(ctx, n.Route, n.JobID, n.RemoteID, n.Obs.State.Terminal() && !n.Unarmed)
	if err != nil {
		return Applied{}, err
	}
	obs := n.Obs
	obs.Source, obs.At = state.FromWebhook, o.now().UTC()
	changed := false
	r, err = o.outside(ctx, n.JobID, n.Route, r, change{seen: seen, apply: func(cur *state.Job) bool {
		if !cur.Delivered(n.DeliveryID) {
			return false // applied before: a duplicate the transport let through
		}
		changed = cur.Apply(obs) != ""
		return true
	}})
	if err != nil {
		return Applied{}, err
	}
	return Applied{Job: r.Job, Changed: changed}, nil
}

// Hint takes an unsigned callback about a job: it changes nothing itself,
// but brings the job's next poll forward to now, so that whatever the
// callback claims is confirmed by the provider before the job moves.
func (wh Webhooks) Hint(ctx context.Context, route, id, remoteID string) error {
	o := wh.o
	r, seen, err := o.ready(ctx, route, id, remoteID, false)
	if err != nil || r.State.Terminal() {
		return err
	}
	_, err = o.outside(ctx, id, route, r, change{seen: seen, sooner: o.now(),
		apply: func(*state.Job) bool { return false }})
	return err
}

// ready reads the job a delivery names and checks it can take it; with
// armed, an unfinished job must have its check too.
func (o *Owner) ready(ctx context.Context, route, id, remoteID string, armed bool) (Record, *seenCheck, error) {
	r, err := o.store.get(ctx, id)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return Record{}, nil, ErrNotReady
	case err != nil:
		return Record{}, nil, err
	case r.Route != route:
		return Record{}, nil, ErrMismatch
	case r.RemoteID == "":
		return Record{}, nil, ErrNotReady
	case r.RemoteID != remoteID:
		return Record{}, nil, ErrMismatch
	case !armed || r.State.Terminal():
		return r, nil, nil
	}
	seen, err := o.currentCheck(ctx, route, id)
	switch {
	case err != nil:
		return Record{}, nil, err
	case seen.seq == 0:
		return Record{}, nil, ErrNotReady
	}
	return r, &seen, nil
}

// ByRemote returns the id of the route's job whose remote id is remoteID;
// state.ErrNotFound when the index has none (not yet: the create's answer
// is being recorded; or no longer).
func (wh Webhooks) ByRemote(ctx context.Context, route, remoteID string) (string, error) {
	o := wh.o
	e, err := o.res.Deliveries.Get(ctx, remoteKey(route, remoteID))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return "", state.ErrNotFound
	case err != nil:
		return "", err
	}
	return string(e.Value()), nil
}
