package jobs_test

import (
	"cmp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// A job canceled on request carries the request's reason, in its record
// and in its canceled event, not the provider's "canceled at ...".
func TestACancelsReasonIsTheJobsReason(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	rec := r.submit("c1", false, time.Now().Add(time.Hour))
	_, ended, err := r.o.Intake().RequestCancelBy(r.ctx, "r", "c1", "the user closed the tab", "")
	require.NoError(t, err)
	require.False(t, ended, "a submitted job waits for its provider cancel")
	_, err = r.o.Intake().Canceled(r.ctx, rec, state.Observation{State: state.Canceled, Raw: "canceled", Reason: "canceled at Replicate", Source: state.FromCancel, At: time.Now()})
	require.NoError(t, err)
	j := r.get("c1")
	require.Equal(t, state.Canceled, j.State)
	require.Equal(t, "the user closed the tab", j.Reason)
	require.Equal(t, "the user closed the tab", j.CancelReason)
	evs := r.events("c1")
	last := evs[len(evs)-1]
	require.Equal(t, events.EventCanceled, last.Type)
	require.Equal(t, "the user closed the tab", last.Job.Reason)
}

// A cancel request ends a job that never reached the provider in the
// same write, with the request's reason (without one, CanceledBeforeSubmit);
// a job whose create is under way keeps the request for its submission.
func TestACancelRequestEndsAJobThatNeverReachedTheProvider(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for id, reason := range map[string]string{"w1": "changed my mind", "w2": ""} {
		_, _, err := r.o.Intake().Accept(r.ctx, held(id, "route paused by bob"))
		require.NoError(t, err)
		rec, ended, err := r.o.RequestCancel(r.ctx, "r", id, reason, "alice")
		require.NoError(t, err)
		require.True(t, ended, id)
		require.Equal(t, state.Canceled, rec.State, id)
		want := cmp.Or(reason, jobs.CanceledBeforeSubmit)
		require.Equal(t, want, r.get(id).Reason, id)
		require.Equal(t, "alice", r.get(id).CancelRequestedBy, id)
		evs := r.events(id)
		require.Equal(t, events.EventCanceled, evs[len(evs)-1].Type, id)
		require.Equal(t, want, evs[len(evs)-1].Job.Reason, id)

		_, ended, err = r.o.RequestCancel(r.ctx, "r", id, reason, "alice")
		require.NoError(t, err)
		require.False(t, ended, "a second request finds the job ended")
	}

	_, _, err := r.o.Intake().Accept(r.ctx, submission("w3", false)) // its first attempt marked
	require.NoError(t, err)
	rec, ended, err := r.o.RequestCancel(r.ctx, "r", "w3", "", "")
	require.NoError(t, err)
	require.False(t, ended, "its create is under way: the submission carries the cancel out")
	require.Equal(t, state.Pending, rec.State)
	require.False(t, rec.CancelRequestedAt.IsZero())

	_, _, err = r.o.RequestCancel(r.ctx, "other", "w3", "", "")
	require.ErrorIs(t, err, jobs.ErrOtherRoute)
	_, _, err = r.o.RequestCancel(r.ctx, "r", "nope", "", "")
	require.ErrorIs(t, err, state.ErrNotFound)
}

// End with UnlessSubmitted (a cancel or an expiry of a job that waited)
// leaves a job that reached the provider, or whose submit call is under
// way, as it is: the submission carries the cancel out.
func TestEndUnlessSubmittedLeavesASubmittedJob(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	canceled := state.Observation{State: state.Canceled, Reason: "canceled before it was submitted", Source: state.FromCancel, At: time.Now()}
	rec := r.submit("w1", false, time.Now().Add(time.Hour))
	got, err := r.o.Intake().End(r.ctx, rec, canceled, jobs.UnlessSubmitted)
	require.NoError(t, err)
	require.Equal(t, state.Queued, got.State, "submitted: left to the submission")

	pending, _, err := r.o.Intake().Accept(r.ctx, submission("w2", false))
	require.NoError(t, err)
	pending, err = r.o.Intake().Attempt(r.ctx, pending, "a1", nil, true)
	require.NoError(t, err)
	got, err = r.o.Intake().End(r.ctx, pending, canceled, jobs.UnlessSubmitted)
	require.NoError(t, err)
	require.Equal(t, state.Pending, got.State, "a submit call under way carries the cancel out")
}

// A withdraw creates the job's record as canceled, with its reason and
// who asked, and publishes the end: a submission of the id taken after
// finds it (Accept does not create it). A retry of the withdraw finds its
// own record; a record ingest made first is returned as it is, for the
// caller to cancel.
func TestAWithdrawEndsTheJobBeforeIngestMakesIt(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const reason = "its create was answered 503"
	rec, created, err := r.o.Withdraw(r.ctx, &state.Job{ID: "wd1", Route: "r", Model: "m"}, reason, "app")
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, state.Canceled, rec.State)
	j := r.get("wd1")
	require.Equal(t, state.Canceled, j.State)
	require.Equal(t, reason, j.Reason)
	require.Equal(t, "app", j.CancelRequestedBy)
	require.Equal(t, []string{events.EventCanceled}, types(r.events("wd1")), "its end is published")
	require.Len(t, r.hooks.finished(), 1, "the Terminal hook sees it once")

	_, created, err = r.o.Withdraw(r.ctx, &state.Job{ID: "wd1", Route: "r", Model: "m"}, reason, "app")
	require.NoError(t, err)
	require.True(t, created, "a retried withdraw finds its own record")
	require.Len(t, r.events("wd1"), 1, "published once")

	after, created, err := r.o.Intake().Accept(r.ctx, submission("wd1", false))
	require.NoError(t, err)
	require.False(t, created, "ingest finds the record and makes nothing")
	require.Equal(t, state.Canceled, after.State)

	_, _, err = r.o.Intake().Accept(r.ctx, submission("wd2", false))
	require.NoError(t, err)
	rec, created, err = r.o.Withdraw(r.ctx, &state.Job{ID: "wd2", Route: "r", Model: "m"}, reason, "app")
	require.NoError(t, err)
	require.False(t, created, "ingest took it first")
	require.Equal(t, state.Pending, rec.State, "returned as it is, for the caller to cancel")
	require.True(t, rec.CancelRequestedAt.IsZero())
}
