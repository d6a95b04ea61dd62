package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/report"
	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// TestReportAgreesWithTheJobs checks the figures of pollux stats (read from
// JetStream and KV) and of pollux watch (kept live from events) against the
// job records and the provider's ground truth.
func TestReportAgreesWithTheJobs(t *testing.T) {
	t.Parallel()
	e := e2etest.Start(t, dev.StackConfig{Sim: sim.Config{TimeScale: e2etest.Scale, Seed: 3,
		Default: sim.Model{QueueMedian: e2etest.D(2 * time.Second), RunMedian: e2etest.D(20 * time.Second), RunSigma: 0.3, FailRate: 0.2},
		Faults:  sim.Faults{WebhookMissingRate: 0.3}}})
	ctx := context.Background()

	live := report.NewLive()
	oc, err := e.JS.OrderedConsumer(ctx, e.NS.EventsStream(), jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	cc, err := oc.Consume(func(msg jetstream.Msg) {
		if ev, err := events.DecodeEvent(msg.Data()); err == nil {
			live.Apply(ev)
		}
	})
	require.NoError(t, err)

	const n = 40
	for i := range n {
		e.Publish(t, e.NS.Submit(dev.RouteName), events.Submit{V: 1, IdempotencyKey: fmt.Sprintf("r-%d", i),
			Model: "a/b", Input: json.RawMessage(`{}`)})
	}
	e2etest.WaitFor(t, "all terminal", 60*time.Second, func() bool { return len(e.Log.Terminal()) == n })
	e2etest.WaitFor(t, "all events seen", 10*time.Second, func() bool {
		return len(e.Log.All()) >= n*2 // submitted + terminal at least
	})
	cc.Stop()

	// A job's last check is acked after its terminal event: the report
	// is read once those acks have landed (or ten seconds have passed,
	// and the assertion below says what is left).
	var r *report.Report
	e2etest.Eventually(func() bool {
		var err error
		r, err = report.Build(ctx, e.Env.Jobs, e.Env.Res)
		require.NoError(t, err)
		return len(r.Routes) == 1 && r.Routes[0].Census.Tracked == 0
	}, 10*time.Second)
	require.Len(t, r.Routes, 1)
	rt := r.Routes[0]
	byState, polls, hooks, expecting := map[string]int{}, 0, 0, 0
	byID := map[string]int{} // each job's polls
	require.NoError(t, e.Env.Jobs.Each(ctx, func(j *state.Job, err error) error {
		require.NoError(t, err)
		byState[string(j.State)]++
		polls += j.Polls
		byID[j.ID] = j.Polls
		if j.WebhookExpected && j.State != state.Lost {
			expecting++
			if j.DetectedBy == state.FromWebhook {
				hooks++
			}
		}
		return nil
	}))
	require.Equal(t, byState, rt.JobsByState)
	require.Equal(t, n, rt.Completions)
	require.InDelta(t, float64(polls)/n, rt.PollsPerCompletion, 0.01)
	require.InDelta(t, float64(hooks)/float64(expecting), rt.WebhookCoverage, 0.001)
	require.Equal(t, expecting-hooks, rt.ReconciliationCatches, "the missing webhooks were caught by polls")
	require.Positive(t, rt.ReconciliationCatches)
	require.Equal(t, 0, rt.Census.Tracked, "nothing left to track")

	got := live.Report(nil).Routes[0]
	require.Equal(t, rt.JobsByState, got.JobsByState, "the live view agrees")
	// The live view counts each job's polls as its terminal event has
	// them; a poll counted after the end (one under way when a webhook
	// ended the job) is in the record alone.
	atEnd := 0
	for id, evs := range e.Log.Terminal() {
		require.LessOrEqual(t, evs[0].Job.Polls, byID[id], "job %s: the record counts at least the terminal event's polls", id)
		atEnd += evs[0].Job.Polls
	}
	require.Equal(t, report.Round(float64(atEnd)/n, 2), got.PollsPerCompletion)
}
