package jobs_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/replicate"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Polls that learn nothing write nothing and are counted by the check's
// deliveries; the poll that learns something writes the record once, with
// every poll counted, and the job's count is exact when it ends.
func TestQuietPollsAreCountedByTheCheck(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.submit("q1", false, time.Now())
	rev := r.revision("q1")

	d, msg := r.poll() // running: a change
	f := d.Fold(jobs.Call{At: time.Now(), Status: running()})
	require.True(t, f.Changed)
	res, err := r.o.Polls().Polled(r.ctx, d, f, jobs.Decision{Due: time.Now()})
	require.NoError(t, err)
	r.settle(msg, res.Outcome)
	require.Equal(t, rev+1, r.revision("q1"))
	require.Equal(t, 1, r.get("q1").Polls)

	for i := range 3 { // running again: quiet
		d, msg := r.poll()
		require.Equal(t, 1+i, d.Live.Polls, "the check's count and its quiet deliveries")
		f := d.Fold(jobs.Call{At: time.Now(), Status: running()})
		require.True(t, f.Quiet)
		require.Equal(t, 2+i, f.After.Polls)
		require.Equal(t, 1+i, f.After.Unchanged)
		res, err := r.o.Polls().Polled(r.ctx, d, f, jobs.Decision{Due: time.Now()})
		require.NoError(t, err)
		require.True(t, res.Outcome.IsLater(), "the check goes back")
		require.Nil(t, res.Job)
		r.settle(msg, res.Outcome)
	}
	require.Equal(t, rev+1, r.revision("q1"), "quiet polls wrote nothing")
	require.Empty(t, r.hooks.finished())

	d, msg = r.poll()
	f = d.Fold(jobs.Call{At: time.Now(), Status: done()})
	res, err = r.o.Polls().Polled(r.ctx, d, f, jobs.Decision{Due: time.Now()})
	require.NoError(t, err)
	require.True(t, res.Outcome.IsStop())
	require.True(t, res.Finished)
	r.settle(msg, res.Outcome)
	j := r.get("q1")
	require.Equal(t, state.Succeeded, j.State)
	require.Equal(t, 5, j.Polls, "every status call counted")
	require.Equal(t, rev+2, r.revision("q1"), "one write per change")
	require.Equal(t, []string{events.EventSubmitted, events.EventRunning, events.EventSucceeded}, types(r.events("q1")))
	fin := r.hooks.finished()
	require.Len(t, fin, 1)
	require.Equal(t, 5, fin[0].Polls, "the hook sees the final count")
	require.Zero(t, r.check("q1").Seq, "the check ended")
}

// A job expecting a webhook is polled rarely, and each of its polls
// publishes a new check counting it, so an outsider ending the job knows
// the exact count at any moment.
func TestPollsOfAWebhookJobAreInItsCheck(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.submit("w1", true, time.Now())
	for i := range 3 {
		d, msg := r.poll()
		require.Equal(t, uint64(2), d.N, "a new check each time")
		f := d.Fold(jobs.Call{At: time.Now(), Status: provider.Status{Observation: state.Observation{State: state.Queued, Raw: "starting"}}})
		require.True(t, f.Quiet)
		res, err := r.o.Polls().Polled(r.ctx, d, f, jobs.Decision{Due: time.Now()})
		require.NoError(t, err)
		require.True(t, res.Outcome.IsStop(), "replaced, not sent back")
		r.settle(msg, res.Outcome)
		require.Equal(t, i+1, r.check("w1").Check.Poll.Polls)
	}
	require.Equal(t, uint64(2), r.revision("w1"), "no record write")
}

// What a status call does to the counters, by how it failed.
func TestFold(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		live                                 events.PollState
		call                                 jobs.Call
		errors, notFound, refused, unchanged int
		quiet, changed                       bool
		state                                state.State
	}{
		"same answer": {live: events.PollState{State: state.Running, Raw: "processing", Unchanged: 2},
			call: jobs.Call{Status: running()}, unchanged: 3, quiet: true, state: state.Running},
		"a change": {live: events.PollState{State: state.Queued, Raw: "starting", Unchanged: 2},
			call: jobs.Call{Status: running()}, changed: true, state: state.Running},
		"progress resets the unchanged count": {live: events.PollState{State: state.Running, Raw: "processing", Progress: ptr(0.3), Unchanged: 5},
			call:    jobs.Call{Status: provider.Status{Observation: state.Observation{State: state.Running, Raw: "processing", Progress: ptr(0.6)}}},
			changed: true, state: state.Running},
		"the same progress again is quiet": {live: events.PollState{State: state.Running, Raw: "processing", Progress: ptr(0.6), Unchanged: 1},
			call:      jobs.Call{Status: provider.Status{Observation: state.Observation{State: state.Running, Raw: "processing", Progress: ptr(0.6)}}},
			unchanged: 2, quiet: true, state: state.Running},
		"a raw status change only": {live: events.PollState{State: state.Running, Raw: "booting"},
			call: jobs.Call{Status: running()}, unchanged: 1, state: state.Running},
		"ends a run of failures": {live: events.PollState{State: state.Running, Raw: "processing", Errors: 2},
			call: jobs.Call{Status: running()}, unchanged: 1, state: state.Running},
		"timeout": {live: events.PollState{State: state.Running, Errors: 1, Unchanged: 2},
			call: jobs.Call{Err: errTimeout}, errors: 2, unchanged: 2, state: state.Running},
		"unknown job": {live: events.PollState{State: state.Running, NotFound: 1, Errors: 1},
			call: jobs.Call{Err: &provider.Error{Class: provider.NotFound}}, errors: 2, notFound: 2, state: state.Running},
		"refused": {live: events.PollState{State: state.Running},
			call: jobs.Call{Err: &provider.Error{Class: provider.Invalid}}, errors: 1, refused: 1, state: state.Running},
		"rate limited": {live: events.PollState{State: state.Running, Errors: 1},
			call: jobs.Call{Err: &provider.Error{Class: provider.RateLimited}}, errors: 1, state: state.Running},
		"auth": {live: events.PollState{State: state.Running},
			call: jobs.Call{Err: &provider.Error{Class: provider.Auth}}, state: state.Running},
		"backwards is ignored": {live: events.PollState{State: state.Running, Raw: "processing"},
			call:      jobs.Call{Status: provider.Status{Observation: state.Observation{State: state.Queued, Raw: "processing"}}},
			unchanged: 1, quiet: true, state: state.Running},
	} {
		live := tc.live
		live.RemoteID, live.Polls = "x", 4
		if live.State == state.Running {
			live.StartedAt = at.Add(-time.Minute)
		}
		d := &jobs.Delivery{Route: "r", JobID: "j", N: 2, Live: &live}
		tc.call.At = at
		f := d.Fold(tc.call)
		require.Equal(t, 5, f.After.Polls, name)
		require.Equal(t, at, f.After.LastPolledAt, name)
		require.Equal(t, tc.errors, f.After.Errors, name+": errors")
		require.Equal(t, tc.notFound, f.After.NotFound, name+": not found")
		require.Equal(t, tc.refused, f.After.Refused, name+": refused")
		require.Equal(t, tc.unchanged, f.After.Unchanged, name+": unchanged")
		require.Equal(t, tc.quiet, f.Quiet, name+": quiet")
		require.Equal(t, tc.changed, f.Changed, name+": changed")
		require.Equal(t, tc.state, f.After.State, name)
		require.Equal(t, 4, live.Polls, name+": the delivery's state is left as it was")
	}
}

// A provider that gives no completion time is taken to have finished
// halfway between the poll that last saw the job running and this one.
func TestFoldDatesAnUndatedCompletion(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	live := events.PollState{RemoteID: "x", State: state.Running, LastPolledAt: at.Add(-time.Minute), CreatedAt: at.Add(-time.Hour)}
	d := &jobs.Delivery{Route: "r", JobID: "j", N: 2, Live: &live}
	f := d.Fold(jobs.Call{At: at, Status: done()})
	require.Equal(t, at.Add(-30*time.Second), f.Obs.CompletedAt)
	f = d.Fold(jobs.Call{At: at, Status: done(), Prev: at.Add(-20 * time.Second)})
	require.Equal(t, at.Add(-10*time.Second), f.Obs.CompletedAt, "the caller knows a later poll")
}

// A poll may end the job by the poller's decision (lost, expired): the
// record ends with it, and the check with the record.
func TestPolledEndsAJobByDecision(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.submit("e1", false, time.Now())
	d, msg := r.poll()
	f := d.Fold(jobs.Call{At: time.Now(), Err: &provider.Error{Class: provider.NotFound}})
	lost := &state.Observation{State: state.Lost, Reason: "gone", Source: state.FromPollux, At: time.Now()}
	res, err := r.o.Polls().Polled(r.ctx, d, f, jobs.Decision{End: lost})
	require.NoError(t, err)
	require.True(t, res.Finished)
	r.settle(msg, res.Outcome)
	j := r.get("e1")
	require.Equal(t, state.Lost, j.State)
	require.Equal(t, 1, j.NotFound)
	require.Equal(t, 1, j.Polls)
	require.NotEmpty(t, j.LastError)
}

// Postponing (a paused route) sends the check back without counting the
// delivery as a poll.
func TestPostponeDoesNotCount(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.submit("p1", false, time.Now())
	d, msg := r.poll()
	out := r.o.Polls().Postpone(r.ctx, d, time.Now())
	require.True(t, out.IsStop(), "replaced by a check carrying the count")
	r.settle(msg, out)
	d, _ = r.poll()
	require.Equal(t, 0, d.Live.Polls)
}

// A check whose job ended without it (a writer that died before removing
// it) reads the record every 32 quiet polls, and ends then: the provider
// saying "running" for ever would not end it otherwise.
func TestQuietPollsReadTheRecordEvery32(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.submit("v1", false, time.Now())
	r.deadEnd("v1", "")
	for quiet := 0; ; quiet++ {
		d, msg := r.poll()
		if d.Ended() {
			require.Equal(t, 32, quiet, "the record was read at the 32nd quiet poll, not before")
			out, err := r.o.Polls().Settle(r.ctx, d)
			require.NoError(t, err)
			r.settle(msg, out)
			break
		}
		require.Less(t, quiet, 32, "the record read at the 32nd quiet poll ends the check")
		f := d.Fold(jobs.Call{At: time.Now(), Status: provider.Status{Observation: state.Observation{State: state.Queued, Raw: "starting"}}})
		require.True(t, f.Quiet, "the provider says nothing new")
		res, err := r.o.Polls().Polled(r.ctx, d, f, jobs.Decision{Due: time.Now()})
		require.NoError(t, err)
		r.settle(msg, res.Outcome)
	}
	// The delivery's end (a Term) is not waited for by the server's answer.
	require.Eventually(t, func() bool { return r.check("v1").Seq == 0 }, 5*time.Second, 10*time.Millisecond, "the check ended")
	require.Equal(t, []string{events.EventSubmitted, events.EventSucceeded}, types(r.events("v1")), "the end the dead writer left is published")
	require.Equal(t, 32, r.get("v1").Polls, "its quiet polls counted")
}

func ptr[T any](v T) *T { return &v }

// A parked check comes back as a new message, its quiet polls counted in
// its content, not in its deliveries: the record is read all the same at
// every 32nd quiet poll of the job.
func TestAParkedChecksQuietPollsReadTheRecord(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.submit("v2", false, time.Now())
	r.deadEnd("v2", "")
	v := r.check("v2")
	c := *v.Check
	ps := *c.Poll
	ps.Polls, ps.Unchanged = 40, 32 // as a fired parked check carries them
	c.Poll = &ps
	b, err := json.Marshal(c)
	require.NoError(t, err)
	_, err = r.js.Publish(r.ctx, events.Default.Check("r", "v2"), b,
		jetstream.WithExpectLastSequenceForSubject(v.Seq, events.Default.CheckOrParked("r", "v2")))
	require.NoError(t, err)
	d, msg := r.poll()
	require.EqualValues(t, 2, d.N, "the new check's first poll")
	require.True(t, d.Ended(), "the record was read")
	out, err := r.o.Polls().Settle(r.ctx, d)
	require.NoError(t, err)
	r.settle(msg, out)
	require.Equal(t, 40, r.get("v2").Polls)
}

// When a provider says its outputs expire (Replicate: an hour after the
// prediction completed), the poll that ends the job records it, in the
// record and in the event that ends it: output custody copies the outputs
// before then, and applications learn how long the URLs live. The answer
// is Replicate's own (its adapter reading its documented sample).
func TestAnEndRecordsWhenTheOutputsExpire(t *testing.T) {
	t.Parallel()
	sample, err := os.ReadFile("../../../pkg/provider/replicate/testdata/succeeded.json")
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(sample)
	}))
	t.Cleanup(srv.Close)
	a, err := replicate.NewAdapter(provider.Config{Route: "r", Kind: replicate.Kind, BaseURL: srv.URL, Token: "r8_test"})
	require.NoError(t, err)
	st, err := a.Status(t.Context(), provider.Ref{ID: "ufawqhfynnddngldkgtslldrkq"})
	require.NoError(t, err)
	expire := time.Date(2026, 11, 29, 10, 1, 12, 250000000, time.UTC).Add(replicate.OutputRetention)
	require.True(t, expire.Equal(st.OutputsExpireAt), "the adapter reads the expiry: %v", st.OutputsExpireAt)

	r := newRig(t)
	r.submit("x1", false, time.Now())
	d, msg := r.poll()
	res, err := r.o.Polls().Polled(r.ctx, d, d.Fold(jobs.Call{At: time.Now(), Status: st}), jobs.Decision{Due: time.Now()})
	require.NoError(t, err)
	require.True(t, res.Finished)
	r.settle(msg, res.Outcome)

	j := r.get("x1")
	require.Equal(t, state.Succeeded, j.State)
	require.Equal(t, st.Outputs, j.Outputs)
	require.True(t, expire.Equal(j.OutputsExpireAt), "the record says when the outputs expire: %v", j.OutputsExpireAt)
	evs := r.events("x1")
	require.NotEmpty(t, evs)
	end := evs[len(evs)-1]
	require.Equal(t, events.EventSucceeded, end.Type)
	require.True(t, expire.Equal(end.Job.OutputsExpireAt), "so does the event that ends the job: %v", end.Job.OutputsExpireAt)
}

// The first bounded exception to exact poll counts: a delivery lost in
// transit (here: its holder died before settling it) counts as a poll
// although no status call may have been made, one per lost delivery. Its
// redelivery's count says one delivery more; nothing else is added.
func TestALostDeliveryCountsOnePoll(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	require.NoError(t, r.res.Checks.DeleteConsumer(r.ctx, events.Default.PartitionConsumer("r", 0, 1)))
	cons, err := events.EnsureConsumer(r.ctx, r.res.Checks,
		events.Default.PollerConsumerConfig("r", 0, 1, events.Options{CheckAckWait: time.Second}))
	require.NoError(t, err)
	r.cons = cons
	r.submit("l1", false, time.Now())

	lost, _ := r.poll() // its holder dies: no call, no settle
	require.Equal(t, 0, lost.Live.Polls)
	d, msg := r.poll() // redelivered once the ack wait ran out
	require.Equal(t, lost.N+1, d.N)
	require.Equal(t, 1, d.Live.Polls, "the lost delivery counts as a poll")
	p, err := r.o.Polls().Polled(r.ctx, d, d.Fold(jobs.Call{At: time.Now(), Status: done()}), jobs.Decision{Due: time.Now()})
	require.NoError(t, err)
	r.settle(msg, p.Outcome)
	require.True(t, p.Finished)
	require.Equal(t, 1+1, r.get("l1").Polls, "one status call, one lost delivery")
}
