package jobs_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// held is a submission stored to wait, without a submit attempt.
func held(id, why string) *state.Job {
	j := submission(id, false)
	j.SubmitAttempts, j.SubmitInDoubt, j.AttemptedAt, j.AttemptID = 0, false, time.Time{}, ""
	j.WaitingFor = why
	return j
}

// A job stored to wait has a waiting event saying why, again when what it
// waits for changes (not when it does not); submitted follows it.
func TestAWaitingJobHasAWaitingEvent(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	rec, created, err := r.o.Intake().Accept(r.ctx, held("h1", "route paused by alice: incident"))
	require.NoError(t, err)
	require.True(t, created)
	rec, err = r.o.Intake().Hold(r.ctx, rec, "route paused by alice: incident")
	require.NoError(t, err)
	rec, err = r.o.Intake().Hold(r.ctx, rec, "account a")
	require.NoError(t, err)
	evs := r.events("h1")
	require.Len(t, evs, 2)
	for i, why := range []string{"route paused by alice: incident", "account a"} {
		require.Equal(t, events.EventWaiting, evs[i].Type)
		require.Equal(t, uint64(i+1), evs[i].Seq)
		require.Equal(t, state.Pending, evs[i].State)
		require.Equal(t, why, evs[i].Job.WaitingFor)
	}
	rec, err = r.o.Intake().Attempt(r.ctx, rec, "a1", nil, true)
	require.NoError(t, err)
	require.Equal(t, "a1", rec.AttemptID)
	require.Empty(t, rec.WaitingFor)
	_, err = r.o.Intake().Submitted(r.ctx, rec, jobs.Created{RemoteID: "rem-h1", Due: time.Now().Add(time.Hour),
		Obs: state.Observation{State: state.Queued, Source: state.FromSubmit, At: time.Now().UTC()}})
	require.NoError(t, err)
	evs = r.events("h1")
	require.Equal(t, events.EventSubmitted, evs[len(evs)-1].Type)
	require.Equal(t, uint64(3), evs[len(evs)-1].Seq)
}

// A cancel recorded before a submit attempt wins: the attempt is not
// marked, so no create is made, and the job ends canceled. (A cancel
// request ends a job that never reached the provider at once; this one's
// first create was under way, and failed, when it came.)
func TestAnAttemptAfterACancelRequestIsNotMade(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	rec, _, err := r.o.Intake().Accept(r.ctx, held("h2", "route paused by alice"))
	require.NoError(t, err)
	rec, err = r.o.Intake().Attempt(r.ctx, rec, "a1", nil, true)
	require.NoError(t, err)
	_, ended, err := r.o.Intake().RequestCancelBy(r.ctx, "r", "h2", "not now", "")
	require.NoError(t, err)
	require.False(t, ended, "its create is under way")
	rec, err = r.o.Intake().Failed(r.ctx, rec, "503")
	require.NoError(t, err)
	require.Equal(t, 1, rec.SubmitFailures)
	after, err := r.o.Intake().Attempt(r.ctx, rec, "a2", nil, true)
	require.NoError(t, err)
	require.NotEqual(t, "a2", after.AttemptID, "the attempt is refused")
	require.False(t, after.SubmitInDoubt)
	require.False(t, after.CancelRequestedAt.IsZero())
	after, err = r.o.Intake().End(r.ctx, after, state.Observation{State: state.Canceled, Reason: jobs.CanceledBeforeSubmit, Source: state.FromCancel, At: time.Now()}, jobs.UnlessSubmitted)
	require.NoError(t, err)
	require.Equal(t, state.Canceled, after.State)
}
