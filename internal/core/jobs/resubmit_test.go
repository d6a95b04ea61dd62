package jobs_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/pkg/state"
)

// A resubmission, once accepted, is listed on the job it resubmits — once,
// however often its submission is delivered — and the new record names
// the old one, who asked and why.
func TestAResubmissionIsLinkedOnBothRecords(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	old := r.submit("o1", false, time.Now().Add(time.Hour))
	_, err := r.o.Intake().End(r.ctx, old, state.Observation{State: state.Failed, Reason: "boom", Source: state.FromPoll, At: time.Now()}, jobs.Always)
	require.NoError(t, err)

	j := submission("o1-r1", false)
	j.ResubmitOf, j.SubmittedBy, j.SubmitReason = "o1", "ops", "provider outage"
	_, created, err := r.o.Intake().Accept(r.ctx, j)
	require.NoError(t, err)
	require.True(t, created)
	// A redelivery of the same submission is a duplicate: no second link.
	again := submission("o1-r1", false)
	again.ResubmitOf, again.AttemptID = "o1", "a2"
	_, created, err = r.o.Intake().Accept(r.ctx, again)
	require.NoError(t, err)
	require.False(t, created)

	require.Equal(t, []string{"o1-r1"}, r.get("o1").ResubmittedAs)
	got := r.get("o1-r1")
	require.Equal(t, "o1", got.ResubmitOf)
	require.Equal(t, "ops", got.SubmittedBy)
	require.Equal(t, "provider outage", got.SubmitReason)
	require.Equal(t, state.Failed, r.get("o1").State, "the old job stays as it ended")
}

// A resubmission of a job whose record is gone is accepted all the same.
func TestAResubmissionOfAGoneJobIsAccepted(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	j := submission("gone-r1", false)
	j.ResubmitOf = "gone"
	_, created, err := r.o.Intake().Accept(r.ctx, j)
	require.NoError(t, err)
	require.True(t, created)
}

func TestResubmittable(t *testing.T) {
	t.Parallel()
	for st, want := range map[state.State]bool{
		state.Failed: true, state.Lost: true, state.Expired: true,
		state.Canceled: false, state.Succeeded: false, state.Running: false, state.Pending: false,
	} {
		ok, why := jobs.Resubmittable(&state.Job{State: st})
		require.Equal(t, want, ok, st)
		require.Equal(t, want, why == "", st)
	}
}
