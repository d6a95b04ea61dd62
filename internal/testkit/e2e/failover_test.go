package e2e_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// TestChaosClusterFailover runs Pollux on a three-node cluster with every
// stream, bucket and consumer replicated three times, and under load stops
// the leader of each stream and bucket in turn (then starts it again, so
// the cluster is whole before the next), submitting more jobs while each
// node is down. Nothing may be lost; the pause until each stream has a new
// leader is measured.
func TestChaosClusterFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cluster run")
	}
	c := natstest.NewCluster(t)
	nc, js := c.Connect(t)
	e := e2etest.StartWith(t, nc, js, dev.StackConfig{
		Sim: sim.Config{TimeScale: e2etest.Scale, Seed: 41, Default: sim.Model{
			QueueMedian: e2etest.D(2 * time.Second), QueueSigma: 0.4, RunMedian: e2etest.D(200 * time.Second), RunSigma: 0.4, FailRate: 0.05}},
		Route:   config.Route{Workers: config.Workers{Submit: 8, Status: 16}},
		Streams: config.Streams{Replicas: 3, IntakeAckWait: 10 * time.Second, CheckAckWait: 10 * time.Second},
	})
	// A delivery a stopped leader lost in transit is delivered again, and
	// its delivery count counts it as a poll: the polls of the checks in
	// flight may be one high.
	e.InexactPolls = true
	n := e2etest.Size(200, 2000)
	ids := e2etest.SubmitN(t, e, "fo", n, func(int) (string, float64) { return "failover/model", 0 })
	e2etest.WaitFor(t, "jobs under way", time.Minute, func() bool { return len(e.Log.Terminal()) >= n/10 })

	ns := e.Env.NS
	streams := []string{ns.IntakeStream(), ns.ChecksStream(), ns.WebhooksStream(), ns.SlotsStream(), ns.EventsStream(),
		"KV_" + ns.JobsBucket(), "KV_" + ns.RoutesBucket(), "KV_" + ns.DeliveriesBucket(), "KV_" + ns.StatsBucket()}
	leader := func(stream string) string {
		if ci := e2etest.StreamCluster(js, stream); ci != nil {
			return ci.Leader
		}
		return ""
	}
	// current reports whether both of the stream's followers are caught up.
	current := func(stream string) bool {
		ci := e2etest.StreamCluster(js, stream)
		if ci == nil || len(ci.Replicas) != 2 {
			return false
		}
		for _, r := range ci.Replicas {
			if !r.Current || r.Offline {
				return false
			}
		}
		return true
	}
	var worstPause time.Duration
	for k, stream := range streams {
		var old string
		// The node restarted for the previous stream may still be catching
		// up on this one: stopping this leader before it has would leave
		// the group without a quorum to elect.
		e2etest.WaitFor(t, stream+" has both followers current", 30*time.Second, func() bool { return current(stream) })
		e2etest.WaitFor(t, stream+" has a leader", 30*time.Second, func() bool { old = leader(stream); return old != "" })
		stopped := time.Now()
		c.Stop(old)
		e2etest.WaitFor(t, stream+" elects a new leader", 30*time.Second, func() bool {
			l := leader(stream)
			return l != "" && l != old
		})
		pause := time.Since(stopped)
		worstPause = max(worstPause, pause)
		t.Logf("%s: leader %s stopped, new leader after %s", stream, old, pause.Round(time.Millisecond))
		// Jobs created while a node is down: once it is back, it serves
		// reads before it has caught up on them (see
		// jobs.records.leaderGet).
		ids = append(ids, e2etest.SubmitN(t, e, fmt.Sprintf("fo%d", k), e2etest.Size(10, 50), func(int) (string, float64) { return "failover/model", 0 })...)
		c.Start(old)
		e2etest.WaitFor(t, "all three nodes back for "+stream, 30*time.Second, func() bool { return current(stream) })
	}
	e.WaitTerminal(t, ids, time.Duration(e2etest.Size(180, 900))*time.Second)
	o := e2etest.Verify(t, e, ids, nil, e.Sim.Predictions(), e.Sim.Stats())
	o.Faults = len(streams)
	t.Logf("worst pause until a new leader: %s", worstPause.Round(time.Millisecond))
	e2etest.ReportFaults(t, fmt.Sprintf("cluster failover (%d leaders)", len(streams)), o)
}
