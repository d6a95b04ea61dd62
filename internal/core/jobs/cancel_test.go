package jobs_test

import (
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
	_, err := r.o.Intake().RequestCancelBy(r.ctx, "r", "c1", "the user closed the tab", "")
	require.NoError(t, err)
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

// A job canceled before it reached the provider carries the request's
// reason too; without one it keeps what the canceling write says.
func TestAWithdrawnJobCarriesTheCancelsReason(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for id, reason := range map[string]string{"w1": "changed my mind", "w2": ""} {
		rec, _, err := r.o.Intake().Accept(r.ctx, submission(id, false))
		require.NoError(t, err)
		_, err = r.o.Intake().RequestCancelBy(r.ctx, "r", id, reason, "")
		require.NoError(t, err)
		_, err = r.o.Intake().End(r.ctx, rec, state.Observation{State: state.Canceled, Reason: "canceled before it was submitted", Source: state.FromCancel, At: time.Now()}, jobs.Always)
		require.NoError(t, err)
		want := reason
		if want == "" {
			want = "canceled before it was submitted"
		}
		require.Equal(t, want, r.get(id).Reason, id)
		evs := r.events(id)
		require.Equal(t, want, evs[len(evs)-1].Job.Reason, id)
	}
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
