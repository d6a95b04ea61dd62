package jobs

import (
	"context"
	"errors"
	"slices"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// The output custody service's verbs (the Custody view): SaveOutputs and OutputsExpiring,
// each a write to a succeeded job with its event.

// ErrNotSucceeded is the error of a custody change to a job that has not
// succeeded: custody is recorded only for a succeeded job.
var ErrNotSucceeded = errors.New("the job has not succeeded")

// SaveOutputs records what output custody kept of a succeeded job's
// outputs (one entry per output) and publishes outputs_saved, after the
// job's terminal event. Recording twice changes nothing: the first
// record stands, and the job's record is returned with it.
func (cu Custody) SaveOutputs(ctx context.Context, id string, saved []state.SavedOutput) (*state.Job, error) {
	o := cu.o
	return o.custody(ctx, id, func(cur *state.Job, c *state.Custody) bool {
		if !c.SavedAt.IsZero() {
			return false
		}
		c.Outputs, c.SavedAt = slices.Clone(saved), o.now().UTC()
		cur.Record(events.EventOutputsSaved, c.SavedAt)
		return true
	})
}

// OutputsExpiring records that a succeeded job's outputs expire soon
// unsaved (state.Job.OutputsUnsaved) and publishes outputs_expiring, once:
// it reports whether this call did (false: already warned, or the outputs
// were saved meanwhile).
func (cu Custody) OutputsExpiring(ctx context.Context, id string) (bool, error) {
	o := cu.o
	warned := false
	_, err := o.custody(ctx, id, func(cur *state.Job, c *state.Custody) bool {
		if !c.ExpiringAt.IsZero() || !cur.OutputsUnsaved() {
			return false
		}
		c.ExpiringAt, warned = o.now().UTC(), true
		cur.Record(events.EventOutputsExpiring, c.ExpiringAt)
		return true
	})
	return warned, err
}

// custody changes a succeeded job's custody from outside its check (see
// outside): apply changes a copy, kept when it reports a change.
func (o *Owner) custody(ctx context.Context, id string, apply func(cur *state.Job, c *state.Custody) bool) (*state.Job, error) {
	r, err := o.store.get(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.State != state.Succeeded {
		return nil, ErrNotSucceeded
	}
	r, err = o.outside(ctx, id, r.Route, r, change{apply: func(cur *state.Job) bool {
		var c state.Custody
		if cur.Custody != nil {
			c = *cur.Custody
		}
		if cur.State != state.Succeeded || !apply(cur, &c) {
			return false
		}
		cur.Custody = &c
		return true
	}})
	if err != nil {
		return nil, err
	}
	return r.Job, nil
}
