package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// A submission costs two writes of its record: the create that marks its
// first attempt, and the write of the provider's answer; its check is
// armed carrying its poll state, and its event is out.
func TestSubmissionWritesTwice(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	due := time.Now().Add(time.Hour)
	rec := r.submit("j1", false, due)
	require.Equal(t, "rem-j1", rec.RemoteID)
	require.Equal(t, state.Queued, rec.State)
	require.False(t, rec.SubmitInDoubt)
	require.Nil(t, rec.Input, "the submission's input goes once the provider has it")
	require.Equal(t, uint64(2), r.revision("j1"), "create + answer")
	require.Equal(t, []string{events.EventSubmitted}, types(r.events("j1")))

	v := r.check("j1")
	require.NotZero(t, v.Seq)
	require.Equal(t, due.UTC().Truncate(time.Microsecond), v.Check.Due.Truncate(time.Microsecond))
	require.Equal(t, "rem-j1", v.Check.Poll.RemoteID)
	require.Equal(t, uint64(1), v.Check.Poll.Published, "the check knows the submitted event is out")
}

// A job of a route that keeps inputs (keep_inputs) keeps its input when
// the provider has it, so that it can be resubmitted as it was; the
// snapshot events carry never shows it.
func TestSubmittedKeepsTheInputOfARouteThatKeepsThem(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	j := submission("k1", false)
	j.KeepInput = true
	rec, created, err := r.o.Intake().Accept(r.ctx, j)
	require.NoError(t, err)
	require.True(t, created)
	rec, err = r.o.Intake().Submitted(r.ctx, rec, jobs.Created{RemoteID: "rem-k1", Due: time.Now().Add(time.Hour),
		Obs: state.Observation{State: state.Queued, Raw: "starting", Source: state.FromSubmit, At: time.Now().UTC()}})
	require.NoError(t, err)
	require.JSONEq(t, `{"p":1}`, string(rec.Input))
	require.Nil(t, rec.Snapshot().Input)
}

// A create whose answer was lost is retried; finding the job then, the
// owner knows its own write by the attempt id, and another submission of
// the same id is a duplicate.
func TestAcceptKnowsItsOwnCreate(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	_, created, err := r.o.Intake().Accept(r.ctx, submission("j2", false))
	require.NoError(t, err)
	require.True(t, created)
	again, created, err := r.o.Intake().Accept(r.ctx, submission("j2", false))
	require.NoError(t, err)
	require.True(t, created, "the same attempt: this create landed before")
	other := submission("j2", false)
	other.AttemptID = "a2"
	_, created, err = r.o.Intake().Accept(r.ctx, other)
	require.NoError(t, err)
	require.False(t, created, "another submission of the id")
	require.Equal(t, "a1", again.AttemptID)

	// A second attempt is marked once, however often its mark is retried.
	rec, err := r.o.Intake().Attempt(r.ctx, again, "a3", nil, false)
	require.NoError(t, err)
	require.Equal(t, 2, rec.SubmitAttempts)
	rec, err = r.o.Intake().Attempt(r.ctx, rec, "a3", nil, false)
	require.NoError(t, err)
	require.Equal(t, 2, rec.SubmitAttempts, "the same attempt again")
}

// The provider's answer to a create is in hand: however long NATS is
// away, it reaches the record, the job's event goes out and its check is
// armed once NATS is back.
func TestSubmittedOutlastsANATSRestart(t *testing.T) {
	t.Parallel()
	srv := natstest.NewRestartable(t)
	_, js := srv.Connect(t)
	r := rigOn(t, js)
	rec, created, err := r.o.Intake().Accept(r.ctx, submission("j3", false))
	require.NoError(t, err)
	require.True(t, created)

	srv.Stop()
	done := make(chan error, 1)
	go func() {
		_, err := r.o.Intake().Submitted(context.Background(), rec, jobs.Created{RemoteID: "rem-j3", Due: time.Now().Add(time.Hour),
			Obs: state.Observation{State: state.Queued, Source: state.FromSubmit, At: time.Now().UTC()}})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Submitted returned while NATS was down: %v", err)
	case <-time.After(2 * time.Second): // NATS stays down this long
	}
	srv.Start(t)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Submitted did not finish once NATS was back")
	}
	got := r.get("j3")
	require.Equal(t, "rem-j3", got.RemoteID)
	require.False(t, got.SubmitInDoubt)
	require.NotZero(t, r.check("j3").Seq, "armed")
	require.Equal(t, []string{events.EventSubmitted}, types(r.events("j3")))
}

// A stop cuts the retrying short, and says so. A write the client had
// buffered may still land once NATS is back (nats.go sends what it
// buffered while reconnecting): then the job is recorded, else it is in
// doubt — never half-written.
func TestSubmittedStopsWithItsContext(t *testing.T) {
	t.Parallel()
	srv := natstest.NewRestartable(t)
	_, js := srv.Connect(t)
	r := rigOn(t, js)
	rec, _, err := r.o.Intake().Accept(r.ctx, submission("j4", false))
	require.NoError(t, err)
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = r.o.Intake().Submitted(ctx, rec, jobs.Created{RemoteID: "rem-j4", Obs: state.Observation{State: state.Queued, At: time.Now()}})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	srv.Start(t)
	j := r.get("j4")
	require.True(t, j.SubmitInDoubt != (j.RemoteID == "rem-j4"), "recorded, or in doubt for the next attempt to resolve: %+v", j)
}

// A refusal by the provider clears the attempt, and a final one ends the
// job with its reason; a job canceled before it was submitted ends too.
func TestRefusedAndEnded(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	rec, _, err := r.o.Intake().Accept(r.ctx, submission("j5", false))
	require.NoError(t, err)
	rec, err = r.o.Intake().Refused(r.ctx, rec, "HTTP 503", nil)
	require.NoError(t, err)
	require.False(t, rec.SubmitInDoubt)
	require.Equal(t, "HTTP 503", rec.LastError)
	require.Empty(t, r.events("j5"))

	fail := state.Observation{State: state.Failed, Reason: "the provider refused the submission: bad prompt", Source: state.FromSubmit, At: time.Now()}
	rec, err = r.o.Intake().Refused(r.ctx, rec, "bad prompt", &fail)
	require.NoError(t, err)
	require.Equal(t, state.Failed, rec.State)
	require.Equal(t, []string{events.EventFailed}, types(r.events("j5")))
	require.Len(t, r.hooks.finished(), 1)

	rec, _, err = r.o.Intake().Accept(r.ctx, submission("j6", false))
	require.NoError(t, err)
	_, _, err = r.o.Intake().RequestCancelBy(r.ctx, "r", "j6", "changed my mind", "")
	require.NoError(t, err)
	rec, err = r.o.Intake().End(r.ctx, rec, state.Observation{State: state.Canceled, Reason: jobs.CanceledBeforeSubmit, Source: state.FromCancel, At: time.Now()}, jobs.Always)
	require.NoError(t, err)
	require.Equal(t, state.Canceled, rec.State)
	require.Equal(t, "changed my mind", rec.CancelReason, "the request's reason is kept")
}

// A cancel request is the job's route's to make.
func TestRequestCancel(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.submit("j7", false, time.Now().Add(time.Hour))
	_, _, err := r.o.Intake().RequestCancelBy(r.ctx, "other", "j7", "", "")
	require.ErrorIs(t, err, jobs.ErrOtherRoute)
	_, _, err = r.o.Intake().RequestCancelBy(r.ctx, "r", "nope", "", "")
	require.ErrorIs(t, err, state.ErrNotFound)
	rec, _, err := r.o.Intake().RequestCancelBy(r.ctx, "r", "j7", "why", "")
	require.NoError(t, err)
	require.False(t, rec.CancelRequestedAt.IsZero())
	again, _, err := r.o.Intake().RequestCancelBy(r.ctx, "r", "j7", "again", "")
	require.NoError(t, err)
	require.Equal(t, "why", again.CancelReason, "the first request stands")
}

// A tracked job is armed and its event published when it is accepted; a
// repeated track request changes nothing.
func TestTrackedJobIsArmedOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	now := time.Now().UTC()
	j := &state.Job{ID: "t1", Route: "r", RemoteID: "rem", State: state.Queued, Tracked: true, CreatedAt: now, NextCheckAt: now.Add(time.Hour)}
	j.Record(events.EventSubmitted, now)
	rec, created, err := r.o.Intake().Accept(r.ctx, j)
	require.NoError(t, err)
	require.True(t, created)
	seq := r.check("t1").Seq
	require.NotZero(t, seq)
	require.NoError(t, r.o.Intake().Resume(r.ctx, rec))
	require.Equal(t, seq, r.check("t1").Seq, "the check stays")
	require.Len(t, r.events("t1"), 1, "published once")
}

// Giving a submission up as lost does not override what the attempt's own
// process recorded meanwhile, nor a newer attempt.
func TestGiveUpYieldsToARecordedResult(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	stale, _, err := r.o.Intake().Accept(r.ctx, submission("g1", false))
	require.NoError(t, err)
	_, err = r.o.Intake().Submitted(r.ctx, stale, jobs.Created{RemoteID: "rem-g1", Due: time.Now().Add(time.Hour),
		Obs: state.Observation{State: state.Queued, At: time.Now()}})
	require.NoError(t, err)
	lost := state.Observation{State: state.Lost, Reason: "in doubt", Source: state.FromPollux, At: time.Now()}
	got, err := r.o.Intake().End(r.ctx, stale, lost, jobs.UnlessSettled)
	require.NoError(t, err)
	require.Equal(t, state.Queued, got.State, "the recorded result stands")
	require.Equal(t, "rem-g1", got.RemoteID)

	rec, _, err := r.o.Intake().Accept(r.ctx, submission("g2", false))
	require.NoError(t, err)
	_, err = r.o.Intake().Attempt(r.ctx, rec, "a2", nil, false)
	require.NoError(t, err)
	got, err = r.o.Intake().End(r.ctx, rec, lost, jobs.UnlessSettled) // judged on attempt a1
	require.NoError(t, err)
	require.Equal(t, state.Pending, got.State, "a newer attempt is under way")
	got, err = r.o.Intake().End(r.ctx, jobs.Record{Job: got.Job}, lost, jobs.UnlessSettled)
	require.NoError(t, err)
	require.Equal(t, state.Lost, got.State, "judged on the current attempt")
	require.True(t, got.SubmitInDoubt, "whether the provider has it is still not known")
}

// An answer that lands after its job was given up in doubt (another
// process took the submission over while this one had no NATS) leaves the
// job lost — a terminal state absorbs — but keeps the remote id, and the
// reason says the provider has the job and how to follow it.
func TestAnAnswerAfterTheJobWasGivenUpIsKept(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	j := submission("j9", false)
	j.SubmitAttempts, j.SubmitInDoubt, j.AttemptedAt = 1, true, time.Now().UTC()
	rec, created, err := r.o.Intake().Accept(r.ctx, j)
	require.NoError(t, err)
	require.True(t, created)
	lost, err := r.o.Intake().End(r.ctx, rec, state.Observation{State: state.Lost, Reason: "the outcome of an interrupted submit call is unknown", Source: state.FromPollux, At: time.Now().UTC()}, jobs.UnlessSettled)
	require.NoError(t, err)
	require.Equal(t, state.Lost, lost.State)

	got, err := r.o.Intake().Submitted(r.ctx, rec, jobs.Created{RemoteID: "rem-late", Due: time.Now().Add(time.Hour),
		Obs: state.Observation{State: state.Queued, Source: state.FromSubmit, At: time.Now().UTC()}})
	require.NoError(t, err)
	require.Equal(t, state.Lost, got.State, "a terminal state absorbs")
	require.Equal(t, "rem-late", got.RemoteID)
	require.False(t, got.SubmitInDoubt)
	require.Contains(t, got.Reason, "the provider has the job as rem-late")
	require.Contains(t, got.Reason, "pollux track --route "+got.Route+" --remote-id rem-late")
	require.Equal(t, []string{events.EventLost}, types(r.events("j9")), "one terminal event, nothing after it")
}
