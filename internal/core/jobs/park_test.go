package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// parkAfter is the parking rigs' threshold: the shortest allowed, so a
// parked check fires within seconds.
const parkAfter = events.MinParkAfter

// parkingRig is a rig whose owner parks checks due parkAfter or more
// away, and whose consumer takes a check back 2 s after its holder died.
func parkingRig(t *testing.T, js jetstream.JetStream) *rig { return parkingRigR(t, js, 1) }

// parkingRigR is parkingRig with every stream and consumer replicated
// replicas times.
func parkingRigR(t *testing.T, js jetstream.JetStream, replicas int) *rig {
	t.Helper()
	ctx := context.Background()
	opts := events.Options{ParkAfter: parkAfter, CheckAckWait: 2 * time.Second, Replicas: replicas}
	res, err := events.Default.Setup(ctx, js, opts)
	require.NoError(t, err)
	h := &tally{}
	o := jobs.New(events.Default, js, res, jobs.Config{Options: opts, Hooks: jobs.Hooks{
		Terminal: func(j *state.Job) { h.mu.Lock(); h.terminal = append(h.terminal, j); h.mu.Unlock() },
	}})
	cons, err := events.EnsureConsumer(ctx, res.Checks, events.Default.PollerConsumerConfig("r", 0, 1, opts))
	require.NoError(t, err)
	return &rig{t: t, ctx: ctx, o: o, js: js, res: res, cons: cons, hooks: h}
}

// fired waits for the job's parked check to fire and returns its first
// delivery, which waits (nak-delayed) until the check's due time.
func (r *rig) fired(id string, within time.Duration) (*jobs.Delivery, jetstream.Msg) {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		b, err := r.cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		require.NoError(r.t, err)
		for msg := range b.Messages() {
			d, err := r.o.Polls().Open(r.ctx, msg)
			require.NoError(r.t, err)
			require.Equal(r.t, id, d.JobID)
			return d, msg
		}
	}
	r.t.Fatalf("job %s's parked check did not fire within %s", id, within)
	return nil, nil
}

// firedOnce checks, once the fired check is acknowledged, that no
// message is left to fire it again.
func (r *rig) firedOnce() {
	r.t.Helper()
	require.Eventually(r.t, func() bool { msgs, _ := r.stored(); return msgs == 0 }, 10*time.Second, 50*time.Millisecond)
	b, err := r.cons.Fetch(1, jetstream.FetchMaxWait(3*time.Second))
	require.NoError(r.t, err)
	for m := range b.Messages() {
		r.t.Fatalf("fired twice: %s", m.Subject())
	}
}

// stored is how many messages the checks stream holds, and how many of
// them the consumer holds ack-pending.
func (r *rig) stored() (msgs uint64, pending int) {
	r.t.Helper()
	si, err := r.res.Checks.Info(r.ctx)
	require.NoError(r.t, err)
	ci, err := r.cons.Info(r.ctx)
	require.NoError(r.t, err)
	return si.State.Msgs, ci.NumAckPending
}

// submitAndPark submits job id, makes its first poll (the provider says
// running) with the next one due at due, parking its check, and returns
// due.
func (r *rig) submitAndPark(id string, due time.Time) time.Time {
	r.t.Helper()
	r.submit(id, false, time.Now())
	d, msg := r.poll()
	res, err := r.o.Polls().Polled(r.ctx, d, d.Fold(jobs.Call{At: time.Now(), Status: running()}), jobs.Decision{Due: due})
	require.NoError(r.t, err)
	require.True(r.t, res.Outcome.IsStop(), "parked: the held check ends")
	r.settle(msg, res.Outcome)
	require.True(r.t, r.check(id).Parked)
	return due
}

// A poll whose next one is far away parks the job's check: it leaves the
// consumer, waits as a schedule, fires shortly before it is due and is
// polled on time, its polls counted; a webhook's end removes a parked
// check at once.
func TestAFarPollParksItsCheck(t *testing.T) {
	t.Parallel()
	_, _, js := natstest.JetStream(t)
	r := parkingRig(t, js)
	// Due at .9 of a second: a fire time rounded to the second would
	// come most of a second before the lead.
	due := r.submitAndPark("p1", time.Now().Add(parkAfter+2*time.Second).Truncate(time.Second).Add(900*time.Millisecond))
	v := r.check("p1")
	require.Equal(t, 1, v.Check.Poll.Polls)
	msgs, pending := r.stored()
	require.Equal(t, uint64(1), msgs, "one check")
	require.Zero(t, pending, "none waits in the consumer")

	d, msg := r.fired("p1", parkAfter+5*time.Second)
	require.EqualValues(t, 1, d.N)
	require.False(t, time.Now().After(due), "fired before it is due")
	require.False(t, time.Now().Before(due.Add(-events.ParkedLead-100*time.Millisecond)),
		"fired no earlier than its lead: the schedule keeps the fraction of a second")
	require.False(t, r.check("p1").Parked)
	out := r.o.Polls().Wait(r.ctx, d, d.Check.Due, time.Until(d.Check.Due))
	require.True(t, out.IsLater(), "the rest of the wait is nak-delayed")
	require.InDelta(t, time.Until(due).Seconds(), out.Delay().Seconds(), 0.5)
	require.NoError(t, out.Settle(msg))

	dd, m2 := r.fired("p1", 10*time.Second)
	require.EqualValues(t, 2, dd.N)
	require.False(t, time.Now().Before(due), "polled when due, not before")
	require.Equal(t, 1, dd.Live.Polls)

	// A quiet poll parks the check too, counting the poll.
	res, err := r.o.Polls().Polled(r.ctx, dd, dd.Fold(jobs.Call{At: time.Now(), Status: running()}), jobs.Decision{Due: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.True(t, res.Outcome.IsStop())
	r.settle(m2, res.Outcome)
	v = r.check("p1")
	require.True(t, v.Parked)
	require.Equal(t, 2, v.Check.Poll.Polls, "the quiet poll is counted in the parked check")

	n := succeeded("d1", "rem-p1")
	n.JobID = "p1"
	a, err := r.o.Webhooks().Webhook(r.ctx, n)
	require.NoError(t, err)
	require.True(t, a.Changed)
	j := r.get("p1")
	require.Equal(t, 2, j.Polls, "exact: a parked check counts every poll")
	require.False(t, j.PollsOpen)
	msgs, _ = r.stored()
	require.Zero(t, msgs, "the parked check is gone: nothing fires")
}

// An outsider bringing a parked check's poll forward replaces it on the
// check subject and removes the parked one, which never fires.
func TestABroughtForwardParkedCheckDoesNotFire(t *testing.T) {
	t.Parallel()
	_, _, js := natstest.JetStream(t)
	r := parkingRig(t, js)
	r.submit("p2", true, time.Now().Add(parkAfter+time.Second))
	first := r.next()
	d, err := r.o.Polls().Open(r.ctx, first)
	require.NoError(t, err)
	out := r.o.Polls().Wait(r.ctx, d, d.Check.Due, time.Until(d.Check.Due))
	require.True(t, out.IsStop(), "a first delivery due far away parks")
	require.NoError(t, out.Settle(first))
	require.True(t, r.check("p2").Parked)

	require.NoError(t, r.o.Webhooks().Hint(r.ctx, "r", "p2", "rem-p2"))
	v := r.check("p2")
	require.False(t, v.Parked)
	require.WithinDuration(t, time.Now(), v.Check.Due, 2*time.Second)
	msgs, _ := r.stored()
	require.Equal(t, uint64(1), msgs)

	// The hinted check is polled; the parked one's fire time passes and
	// no second check appears.
	p, pm := r.poll()
	require.Equal(t, "p2", p.JobID)
	res, err := r.o.Polls().Polled(r.ctx, p, p.Fold(jobs.Call{At: time.Now(), Status: running()}), jobs.Decision{Due: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	r.settle(pm, res.Outcome)
	b, err := r.cons.Fetch(1, jetstream.FetchMaxWait(parkAfter))
	require.NoError(t, err)
	for m := range b.Messages() {
		t.Fatalf("a second check fired: %s", m.Subject())
	}
	msgs, _ = r.stored()
	require.Equal(t, uint64(1), msgs, "one check, parked again")
	require.True(t, r.check("p2").Parked)
}

// A poller parking a check an outsider replaced meanwhile is refused: the
// job keeps one check, the outsider's. A poller that died after parking,
// before ending its delivery, has the old check come back: its next poll
// cannot replace the parked check either, so the job still has one.
func TestParkingLeavesOneCheck(t *testing.T) {
	t.Parallel()
	_, _, js := natstest.JetStream(t)
	r := parkingRig(t, js)
	r.submit("p3", true, time.Now())
	d, msg := r.poll()
	require.NoError(t, r.o.Webhooks().Hint(r.ctx, "r", "p3", "rem-p3"))
	res, err := r.o.Polls().Polled(r.ctx, d, d.Fold(jobs.Call{At: time.Now(), Status: running()}), jobs.Decision{Due: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	r.settle(msg, res.Outcome)
	require.False(t, r.check("p3").Parked, "the outsider's check stays")
	msgs, _ := r.stored()
	require.Equal(t, uint64(1), msgs)

	d, msg = r.poll()
	res, err = r.o.Polls().Polled(r.ctx, d, d.Fold(jobs.Call{At: time.Now(), Status: running()}), jobs.Decision{Due: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.True(t, res.Outcome.IsStop())
	// The poller dies here: msg is never settled, and comes back after
	// the consumer's ack wait.
	_ = msg
	require.True(t, r.check("p3").Parked)
	again := r.next()
	da, err := r.o.Polls().Open(r.ctx, again)
	require.NoError(t, err)
	require.Greater(t, da.N, d.N, "the same check, redelivered")
	res, err = r.o.Polls().Polled(r.ctx, da, da.Fold(jobs.Call{At: time.Now(), Status: running()}), jobs.Decision{Due: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	r.settle(again, res.Outcome)
	require.Eventually(t, func() bool {
		msgs, pending := r.stored()
		return msgs == 1 && pending == 0
	}, 5*time.Second, 20*time.Millisecond, "one check: the parked one")
	require.True(t, r.check("p3").Parked)
}

// A route repartitioned while a check is parked loses nothing: the check
// fires onto its subject, and the partition that now holds the job's slot
// delivers it, once.
func TestAParkedCheckFollowsARepartition(t *testing.T) {
	t.Parallel()
	_, _, js := natstest.JetStream(t)
	r := parkingRig(t, js)
	due := r.submitAndPark("p6", time.Now().Add(parkAfter+time.Second))

	opts := events.Options{ParkAfter: parkAfter, CheckAckWait: 2 * time.Second}
	require.NoError(t, r.res.Checks.DeleteConsumer(r.ctx, events.Default.PartitionConsumer("r", 0, 1)))
	var parts [2]jetstream.Consumer
	for p := range parts {
		c, err := events.EnsureConsumer(r.ctx, r.res.Checks, events.Default.PollerConsumerConfig("r", p, 2, opts))
		require.NoError(t, err)
		parts[p] = c
	}
	mine := events.CheckSlot("p6") % 2
	r.cons = parts[mine]
	fd, fm := r.fired("p6", time.Until(due)+5*time.Second)
	require.EqualValues(t, 1, fd.N)
	require.Equal(t, 1, fd.Live.Polls, "the poll made before the repartition is counted")
	require.NoError(t, fm.Ack())
	b, err := parts[1-mine].Fetch(1, jetstream.FetchMaxWait(2*time.Second))
	require.NoError(t, err)
	for m := range b.Messages() {
		t.Fatalf("the other partition got %s", m.Subject())
	}
}

// A parked check outlasts a server restart: one whose fire time passed
// while the server was down fires once it is back.
func TestAParkedCheckOutlastsARestart(t *testing.T) {
	t.Parallel()
	srv := natstest.NewRestartable(t)
	_, js := srv.Connect(t)
	r := parkingRig(t, js)
	due := r.submitAndPark("p4", time.Now().Add(parkAfter+time.Second))

	srv.Restart(t, time.Until(due)) // down past the fire time
	fd, fm := r.fired("p4", 30*time.Second)
	// A delivery to a pull request the restart cut off is delivered again
	// (N > 1; make test saw 3): the check is still one message, fired once.
	t.Logf("delivered %d times", fd.N)
	require.Equal(t, 1, fd.Live.Polls)
	require.NoError(t, fm.Ack())
	r.firedOnce()
}

// A parked check outlasts the failover of the checks stream's leader on
// a three-node cluster: the new leader fires it, once.
func TestAParkedCheckFiresOnceAcrossAFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster run")
	}
	t.Parallel()
	c := natstest.NewCluster(t)
	_, js := c.Connect(t)
	r := parkingRigR(t, js, 3)
	due := r.submitAndPark("p5", time.Now().Add(parkAfter+2*time.Second))

	info, err := r.res.Checks.Info(r.ctx)
	require.NoError(t, err)
	old := info.Cluster.Leader
	c.Stop(old)
	require.Eventually(t, func() bool {
		info, err := r.res.Checks.Info(r.ctx)
		return err == nil && info.Cluster.Leader != "" && info.Cluster.Leader != old
	}, 30*time.Second, 100*time.Millisecond, "a new leader")

	fd, fm := r.fired("p5", time.Until(due)+20*time.Second)
	// A delivery a pull request lost in the leader change is delivered
	// again (N > 1): the check is still one message, fired once.
	t.Logf("delivered %d times", fd.N)
	require.Equal(t, 1, fd.Live.Polls)
	require.NoError(t, fm.Ack())
	r.firedOnce()
}
