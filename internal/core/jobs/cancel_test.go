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
