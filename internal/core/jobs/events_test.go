package jobs_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// A writer that died between its write and its publish leaves the events
// in the record's outbox; whoever resumes the job publishes them, once,
// however often it resumes.
func TestUnpublishedEventsArePublishedOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	now := time.Now().UTC()
	j := &state.Job{ID: "o1", Route: "r", RemoteID: "rem", State: state.Queued, CreatedAt: now}
	j.Record(events.EventSubmitted, now)
	j.Apply(state.Observation{State: state.Running, At: now})
	b, err := json.Marshal(j)
	require.NoError(t, err)
	_, err = r.res.Jobs.Create(r.ctx, "o1", b) // written, not published: the "crash"
	require.NoError(t, err)

	rec, created, err := r.o.Intake().Accept(r.ctx, &state.Job{ID: "o1", Route: "r"})
	require.NoError(t, err)
	require.False(t, created)
	require.NoError(t, r.o.Intake().Resume(r.ctx, rec))
	require.NoError(t, r.o.Intake().Resume(r.ctx, rec), "a second resumer with the same stale copy")
	evs := r.events("o1")
	require.Equal(t, []string{events.EventSubmitted, events.EventRunning}, types(evs))
	require.Equal(t, []uint64{1, 2}, []uint64{evs[0].Seq, evs[1].Seq})
	require.NotZero(t, r.check("o1").Seq, "and it is armed")
}

// Events are known to be out by what the events stream holds, not only by
// the stream's duplicate window (minutes): an event already in the stream
// without its message id, as one published long ago would be past the
// window, is not published again.
func TestAnEventInTheStreamIsNotRepeated(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	now := time.Now().UTC()
	j := &state.Job{ID: "o2", Route: "r", RemoteID: "rem", State: state.Queued, CreatedAt: now}
	j.Record(events.EventSubmitted, now)
	b, err := json.Marshal(j)
	require.NoError(t, err)
	_, err = r.res.Jobs.Create(r.ctx, "o2", b)
	require.NoError(t, err)
	ev, err := events.NewEvent(j, j.Outbox[0]).Encode()
	require.NoError(t, err)
	_, err = r.js.Publish(r.ctx, events.Default.Event("r", "o2"), ev) // no Nats-Msg-Id
	require.NoError(t, err)

	rec, _, err := r.o.Intake().Accept(r.ctx, &state.Job{ID: "o2", Route: "r"})
	require.NoError(t, err)
	require.NoError(t, r.o.Intake().Resume(r.ctx, rec))
	require.Len(t, r.events("o2"), 1)

	// The next write empties the outbox without a write of its own.
	d, msg := r.poll()
	f := d.Fold(jobs.Call{At: time.Now(), Status: running()})
	res, err := r.o.Polls().Polled(r.ctx, d, f, jobs.Decision{Due: time.Now()})
	require.NoError(t, err)
	r.settle(msg, res.Outcome)
	got := r.get("o2")
	require.Len(t, got.Outbox, 1, "only the new event")
	require.Equal(t, events.EventRunning, got.Outbox[0].Type)
	require.Equal(t, []string{events.EventSubmitted, events.EventRunning}, types(r.events("o2")))
}

// Events older than the events stream keeps are not published again: the
// stream dropped them, and publishing them would repeat them.
func TestEventsPastTheStreamsAgeAreNotRepublished(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	long := time.Now().UTC().Add(-30 * 24 * time.Hour)
	j := &state.Job{ID: "o3", Route: "r", RemoteID: "rem", State: state.Succeeded, CreatedAt: long}
	j.Record(events.EventSucceeded, long)
	b, err := json.Marshal(j)
	require.NoError(t, err)
	_, err = r.res.Jobs.Create(r.ctx, "o3", b)
	require.NoError(t, err)
	rec, _, err := r.o.Intake().Accept(r.ctx, &state.Job{ID: "o3", Route: "r"})
	require.NoError(t, err)
	require.NoError(t, r.o.Intake().Resume(r.ctx, rec))
	require.Empty(t, r.events("o3"))
}

func TestRejectOncePerIntakeMessage(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	rj := events.Rejection{Kind: "submit", Subject: "pollux.submit.r", IntakeSeq: 42, Field: "model", Error: "model: required"}
	require.NoError(t, r.o.Intake().Reject(r.ctx, "r", "j4", rj))
	require.NoError(t, r.o.Intake().Reject(r.ctx, "r", "j4", rj), "a redelivery of the same intake message")
	evs := r.events("j4")
	require.Len(t, evs, 1)
	require.Equal(t, "model", evs[0].Rejection.Field)

	rj.IntakeSeq = 43
	require.NoError(t, r.o.Intake().Reject(r.ctx, "bad route!", "bad id!", rj))
	c, err := r.js.Stream(r.ctx, events.Default.EventsStream())
	require.NoError(t, err)
	m, err := c.GetLastMsgForSubject(r.ctx, events.Default.Event("_", "_"))
	require.NoError(t, err, "invalid tokens are replaced by placeholders")
	ev, err := events.DecodeEvent(m.Data)
	require.NoError(t, err)
	require.Equal(t, "_", ev.Route)
}

// deadEnd ends job id the way a writer that died right after its write
// leaves it: the record terminal, the end in its outbox, unpublished, and
// the check still out.
func (r *rig) deadEnd(id, delivery string) {
	r.t.Helper()
	e, err := r.res.Jobs.Get(r.ctx, id)
	require.NoError(r.t, err)
	j, err := state.Decode(e.Value())
	require.NoError(r.t, err)
	if delivery != "" {
		require.True(r.t, j.Delivered(delivery))
	}
	j.Apply(state.Observation{State: state.Succeeded, Raw: "succeeded", Source: state.FromPoll, At: time.Now().UTC()})
	require.Equal(r.t, state.Succeeded, j.State)
	b, err := json.Marshal(j)
	require.NoError(r.t, err)
	_, err = r.res.Jobs.Update(r.ctx, id, b, e.Revision())
	require.NoError(r.t, err)
	require.NotZero(r.t, r.check(id).Seq, "the check is still out")
}

// A poller that ended a job and died before publishing the end leaves its
// check out: the next poll of that check finds the job ended, and before
// the check ends the end is published.
func TestAPollPublishesAnEndADeadWriterLeft(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.submit("de1", false, time.Now())
	r.deadEnd("de1", "")
	d, msg := r.poll()
	f := d.Fold(jobs.Call{At: time.Now(), Status: done()})
	res, err := r.o.Polls().Polled(r.ctx, d, f, jobs.Decision{Due: time.Now()})
	require.NoError(t, err)
	require.True(t, res.Outcome.IsStop())
	r.settle(msg, res.Outcome)
	require.Equal(t, []string{events.EventSubmitted, events.EventSucceeded}, types(r.events("de1")))
	require.Zero(t, r.check("de1").Seq)
}

// The same when the writer was the webhook applier and the transport
// redelivers the delivery: the duplicate changes nothing, and the end is
// published before the check is removed.
func TestADuplicateDeliveryPublishesAnEndADeadWriterLeft(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.submit("de2", true, time.Now().Add(time.Hour))
	r.deadEnd("de2", "d1")
	n := succeeded("d1", "rem-de2")
	n.JobID = "de2"
	a, err := r.o.Webhooks().Webhook(r.ctx, n)
	require.NoError(t, err)
	require.False(t, a.Changed)
	require.Equal(t, []string{events.EventSubmitted, events.EventSucceeded}, types(r.events("de2")))
	require.Zero(t, r.check("de2").Seq, "polling stopped")
}
