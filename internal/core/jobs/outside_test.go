package jobs_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

func succeeded(delivery, remote string) jobs.Notice {
	return jobs.Notice{Route: "r", JobID: "", DeliveryID: delivery, RemoteID: remote,
		Obs: state.Observation{State: state.Succeeded, Raw: "succeeded"}}
}

// A webhook ending a job stops its polling at once, and its count is the
// exact one its check carries.
func TestWebhookEndsAWebhookJobAtOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.submit("h1", true, time.Now())
	for range 2 { // two reconciliation polls, each in the check
		d, msg := r.poll()
		f := d.Fold(jobs.Call{At: time.Now(), Status: running()})
		res, err := r.o.Polls().Polled(r.ctx, d, f, jobs.Decision{Due: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		r.settle(msg, res.Outcome)
	}
	n := succeeded("d1", "rem-h1")
	n.JobID = "h1"
	a, err := r.o.Webhooks().Webhook(r.ctx, n)
	require.NoError(t, err)
	require.True(t, a.Changed)
	j := r.get("h1")
	require.Equal(t, state.Succeeded, j.State)
	require.Equal(t, state.FromWebhook, j.DetectedBy)
	require.Equal(t, 2, j.Polls, "exact")
	require.False(t, j.PollsOpen)
	require.Zero(t, r.check("h1").Seq, "polling stopped at once")
	fin := r.hooks.finished()
	require.Len(t, fin, 1)
	require.Equal(t, 2, fin[0].Polls)

	// The same delivery again changes nothing and leaves no check.
	a, err = r.o.Webhooks().Webhook(r.ctx, n)
	require.NoError(t, err)
	require.False(t, a.Changed)
	require.Equal(t, 1, r.get("h1").Webhooks)
	require.Len(t, r.hooks.finished(), 1)
}

// A job that expects no webhook, polled quietly, has polls only its
// poller can count: an outsider ending it leaves its check for the
// poller, which settles the count at its next delivery — exact, with the
// poll that confirms the end.
func TestAnEndByAnOutsiderIsSettledByThePoller(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.submit("h2", false, time.Now().Add(-time.Minute))
	d, msg := r.poll()
	f := d.Fold(jobs.Call{At: time.Now(), Status: running()})
	res, err := r.o.Polls().Polled(r.ctx, d, f, jobs.Decision{Due: time.Now()})
	require.NoError(t, err)
	r.settle(msg, res.Outcome) // 1 poll, written (a change)
	d, msg = r.poll()
	f = d.Fold(jobs.Call{At: time.Now(), Status: running()})
	require.True(t, f.Quiet)
	res, err = r.o.Polls().Polled(r.ctx, d, f, jobs.Decision{Due: time.Now()})
	require.NoError(t, err)
	r.settle(msg, res.Outcome) // 2 polls, the second only in the check's deliveries

	n := succeeded("d2", "rem-h2")
	n.JobID = "h2"
	_, err = r.o.Webhooks().Webhook(r.ctx, n)
	require.NoError(t, err)
	j := r.get("h2")
	require.Equal(t, state.Succeeded, j.State, "the job ends at once")
	require.True(t, j.PollsOpen, "its count does not yet")
	require.Equal(t, 1, j.Polls)
	require.Empty(t, r.hooks.finished(), "not final yet")
	require.NotZero(t, r.check("h2").Seq, "the check is left to the poller")

	d, msg = r.poll()
	require.Equal(t, 2, d.Live.Polls)
	f = d.Fold(jobs.Call{At: time.Now(), Status: done()}) // the poll confirms the end
	res, err = r.o.Polls().Polled(r.ctx, d, f, jobs.Decision{Due: time.Now()})
	require.NoError(t, err)
	require.True(t, res.Outcome.IsStop())
	r.settle(msg, res.Outcome)
	j = r.get("h2")
	require.False(t, j.PollsOpen)
	require.Equal(t, 3, j.Polls, "every status call, the confirming one too")
	require.Equal(t, state.FromWebhook, j.DetectedBy, "still detected by the webhook")
	fin := r.hooks.finished()
	require.Len(t, fin, 1)
	require.Equal(t, 3, fin[0].Polls)
	require.Equal(t, []string{events.EventSubmitted, events.EventRunning, events.EventSucceeded}, types(r.events("h2")),
		"the settling wrote no event")
}

// Before a job's first poll is due its check counts everything, so an
// outsider removes it at once whatever the job expects.
func TestAnEndBeforeTheFirstPollRemovesTheCheck(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	rec := r.submit("h3", false, time.Now().Add(time.Hour))
	_, err := r.o.Intake().Canceled(r.ctx, rec, state.Observation{State: state.Canceled, Raw: "canceled", Source: state.FromCancel, At: time.Now()})
	require.NoError(t, err)
	j := r.get("h3")
	require.Equal(t, state.Canceled, j.State)
	require.False(t, j.PollsOpen)
	require.Zero(t, r.check("h3").Seq)
	require.Len(t, r.hooks.finished(), 1)
}

// A cancel answered "not final" brings the next poll forward, to confirm.
func TestANonFinalCancelBringsThePollForward(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	rec := r.submit("h4", true, time.Now().Add(time.Hour))
	before := r.check("h4")
	_, err := r.o.Intake().Canceled(r.ctx, rec, state.Observation{State: state.Unknown, Raw: "CANCELLATION_REQUESTED", Source: state.FromCancel, At: time.Now()})
	require.NoError(t, err)
	after := r.check("h4")
	require.NotEqual(t, before.Seq, after.Seq)
	require.WithinDuration(t, time.Now().Add(time.Second), after.Check.Due, 2*time.Second)
}

// A delivery that arrives before the job can take it is refused for now:
// the record does not know the remote id yet, or the job has no check
// yet. One about another job never applies.
func TestAnEarlyDeliveryIsNotReady(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	n := succeeded("d5", "rem-h5")
	n.JobID = "h5"
	_, err := r.o.Webhooks().Webhook(r.ctx, n)
	require.ErrorIs(t, err, jobs.ErrNotReady, "no record yet")

	rec, _, err := r.o.Intake().Accept(r.ctx, submission("h5", true))
	require.NoError(t, err)
	_, err = r.o.Webhooks().Webhook(r.ctx, n)
	require.ErrorIs(t, err, jobs.ErrNotReady, "the create's answer is not recorded yet")

	r.submit("h6", true, time.Now().Add(time.Hour))
	other := succeeded("d6", "someone-else")
	other.JobID = "h6"
	_, err = r.o.Webhooks().Webhook(r.ctx, other)
	require.ErrorIs(t, err, jobs.ErrMismatch)
	other.Route, other.RemoteID = "elsewhere", "rem-h6"
	_, err = r.o.Webhooks().Webhook(r.ctx, other)
	require.ErrorIs(t, err, jobs.ErrMismatch)

	_, err = r.o.Intake().Submitted(r.ctx, rec, jobs.Created{RemoteID: "rem-h5", Due: time.Now().Add(time.Hour),
		Obs: state.Observation{State: state.Queued, At: time.Now()}})
	require.NoError(t, err)
	a, err := r.o.Webhooks().Webhook(r.ctx, n)
	require.NoError(t, err, "ready once recorded and armed")
	require.True(t, a.Changed)
}

// An unsigned callback brings the next poll forward and changes nothing
// else.
func TestHintBringsThePollForward(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.submit("h7", true, time.Now().Add(time.Hour))
	rev := r.revision("h7")
	require.NoError(t, r.o.Webhooks().Hint(r.ctx, "r", "h7", "rem-h7"))
	require.Equal(t, rev, r.revision("h7"), "no write")
	require.WithinDuration(t, time.Now(), r.check("h7").Check.Due, 2*time.Second)
	require.ErrorIs(t, r.o.Webhooks().Hint(r.ctx, "r", "h7", "other"), jobs.ErrMismatch)
	require.ErrorIs(t, r.o.Webhooks().Hint(r.ctx, "r", "nope", "x"), jobs.ErrNotReady)
}

// The third bounded exception to exact poll counts: a poll under way when
// a hint brings a counted check forward goes uncounted, one at most. The
// hint's check carries every poll counted before it, so the job's count
// misses the one poll the hint overtook, and no other.
func TestAHintLeavesOnePollUncounted(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.submit("h8", true, time.Now())
	calls := 0
	poll := func(st provider.Status, between func()) jobs.Polled {
		d, msg := r.poll()
		calls++
		f := d.Fold(jobs.Call{At: time.Now(), Status: st})
		between()
		p, err := r.o.Polls().Polled(r.ctx, d, f, jobs.Decision{Due: time.Now()})
		require.NoError(t, err)
		r.settle(msg, p.Outcome)
		return p
	}
	starting := provider.Status{Observation: state.Observation{State: state.Queued, Raw: "starting"}}
	poll(starting, func() {})
	poll(starting, func() { require.NoError(t, r.o.Webhooks().Hint(r.ctx, "r", "h8", "rem-h8")) })
	poll(starting, func() {})
	p := poll(done(), func() {})
	require.True(t, p.Finished)
	require.Equal(t, calls-1, r.get("h8").Polls, "one poll uncounted: the one the hint overtook")
}
