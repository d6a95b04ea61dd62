package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// faultyStack is a stack whose provider misbehaves in every way issue 2
// names: 429s with Retry-After, 5xx, lost jobs, duplicate, late and missing
// webhooks.
func faultyStack(t *testing.T, seed int64) *e2etest.Env {
	return e2etest.Start(t, dev.StackConfig{
		Sim: sim.Config{
			TimeScale: e2etest.Scale, Seed: seed,
			Models: map[string]sim.Model{
				"e2e/fast":  {QueueMedian: e2etest.D(2 * time.Second), QueueSigma: 0.5, RunMedian: e2etest.D(20 * time.Second), RunSigma: 0.4, FailRate: 0.1},
				"e2e/slow":  {QueueMedian: e2etest.D(5 * time.Second), QueueSigma: 0.5, RunMedian: e2etest.D(70 * time.Second), RunSigma: 0.4, FailRate: 0.1},
				"e2e/ages":  {QueueMedian: e2etest.D(2 * time.Second), RunMedian: e2etest.D(30 * time.Minute)},
				"e2e/stuck": {QueueMedian: e2etest.D(2 * time.Second), NeverFinish: 1},
			},
			Faults: sim.Faults{
				RateLimitRate: 0.01, RetryAfter: e2etest.D(time.Second),
				// A call already on its way when the 429 came may reach the
				// provider late on a machine make test keeps busy: half of
				// Retry-After is still long enough for a fleet that ignored
				// the pause to be seen calling.
				RetryAfterGrace: e2etest.D(500 * time.Millisecond),
				ServerErrorRate: 0.03, LostRate: 0.03,
				WebhookMissingRate: 0.2, WebhookDuplicateRate: 0.2, WebhookLateRate: 0.1, WebhookLateBy: e2etest.D(300 * time.Millisecond),
			},
		},
		Route: config.Route{Workers: config.Workers{Submit: 8, Status: 16}},
	})
}

// TestLifecycleUnderFaults is issue 2's acceptance run: 300 jobs with
// duplicate submissions and every kind of provider fault. Every job reaches
// exactly one terminal state that agrees with the provider's truth, the
// provider sees one create per idempotency key and no call before a
// Retry-After passed, no check message is left, and each job's events
// arrive in order.
func TestLifecycleUnderFaults(t *testing.T) {
	e := faultyStack(t, 7)
	ns := e.NS
	rnd := rand.New(rand.NewPCG(7, 7))

	type want struct {
		key   string
		state state.State // expected terminal state, "" when any
	}
	jobs := map[string]want{} // job id → expectation
	submit := func(i int, model string, timeoutS float64) (id string, msg []byte) {
		s := events.Submit{V: 1, Model: model, Input: json.RawMessage(fmt.Sprintf(`{"prompt":"clip %d"}`, i)), TimeoutS: timeoutS}
		if i%15 == 0 {
			s.ID = fmt.Sprintf("explicit-%03d", i) // some jobs name themselves
			id = s.ID
		} else {
			s.IdempotencyKey = fmt.Sprintf("key-%03d", i)
			id = events.KeyID(dev.RouteName, s.IdempotencyKey)
		}
		msg, err := json.Marshal(s)
		require.NoError(t, err)
		jobs[id] = want{key: events.KeyID(dev.RouteName, s.IdempotencyKey)}
		if s.IdempotencyKey == "" {
			jobs[id] = want{key: s.ID}
		}
		return id, msg
	}

	var later [][]byte
	var toCancel []string
	for i := range 300 {
		model := "e2e/fast"
		var timeout float64
		switch {
		case i%3 == 0:
			model = "e2e/slow"
		case i%50 == 1:
			model, timeout = "e2e/stuck", 3 // never finishes: its deadline must end it
		case i%60 == 2:
			model = "e2e/ages"
		}
		id, msg := submit(i, model, timeout)
		if model == "e2e/stuck" {
			jobs[id] = want{key: jobs[id].key, state: state.Expired}
		}
		if model == "e2e/ages" {
			jobs[id] = want{key: jobs[id].key, state: state.Canceled}
			toCancel = append(toCancel, id)
		}
		e.Publish(t, ns.Submit(dev.RouteName), msg)
		switch r := rnd.Float64(); {
		case r < 0.1:
			e.Publish(t, ns.Submit(dev.RouteName), msg) // duplicate at once
		case r < 0.2:
			later = append(later, msg) // duplicate after the others
		}
	}

	// Malformed intake: each gets a rejected event naming the problem.
	big := `{"v":1,"model":"m","input":{"p":"` + strings.Repeat("x", events.MaxMessageBytes) + `"}}`
	malformed := []struct{ subject, body, field, contains string }{
		{ns.Submit(dev.RouteName), `not json`, "", "not a JSON object"},
		{ns.Submit(dev.RouteName), `{"v":1,"input":{}}`, "model", "required"},
		{ns.Submit(dev.RouteName), `{"v":1,"id":"bad id!","model":"m","input":{}}`, "id", "outside"},
		{ns.Submit(dev.RouteName), `{"v":9,"model":"m","input":{}}`, "v", "unsupported version"},
		{ns.Submit(dev.RouteName), `{"v":1,"model":"m","input":"x"}`, "input", "object"},
		{ns.Submit(dev.RouteName), `{"v":1,"model":"m","input":{},"deadline":"2001-01-01T00:00:00Z"}`, "deadline", "in the past"},
		{ns.Submit(dev.RouteName), big, "", "larger than"},
		{ns.Cancel(dev.RouteName), `{"v":1,"id":"no-such-job"}`, "id", "no such job"},
		{ns.Track(dev.RouteName), `{"v":1,"model":"m"}`, "remote_id", "required"},
		{ns.Submit("no-such-route"), `{"v":1,"model":"m","input":{}}`, "", "no route named"},
	}
	for _, m := range malformed {
		e.Publish(t, m.subject, m.body)
	}

	// Cancel the jobs that would take ages, once they are submitted.
	for _, id := range toCancel {
		e2etest.WaitFor(t, "job "+id+" submitted", 30*time.Second, func() bool {
			j, err := e.Env.Jobs.Get(context.Background(), id)
			return err == nil && j.RemoteID != ""
		})
		e.Publish(t, ns.Cancel(dev.RouteName), events.Cancel{V: 1, ID: id, Reason: "test"})
	}
	for _, msg := range later {
		e.Publish(t, ns.Submit(dev.RouteName), msg)
	}

	if !e2etest.Eventually(func() bool { return len(e.Log.Terminal()) >= len(jobs) }, 120*time.Second) {
		terminal := e.Log.Terminal()
		for id := range jobs {
			if len(terminal[id]) == 0 {
				j, err := e.Env.Jobs.Get(context.Background(), id)
				b, _ := json.Marshal(j)
				t.Logf("not terminal: %s: %v %s", id, err, b)
			}
		}
		info, _ := e.Env.Res.Checks.Info(context.Background())
		t.Logf("checks stream: %+v", info.State)
		c, _ := e.Env.Res.Checks.Consumer(context.Background(), "poller-"+dev.RouteName)
		ci, _ := c.Info(context.Background())
		t.Logf("poller consumer: pending %d ack-pending %d redelivered %d waiting %d delivered %+v ackfloor %+v",
			ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting, ci.Delivered, ci.AckFloor)
		t.Fatalf("%d of %d jobs terminal", len(terminal), len(jobs))
	}
	// Duplicates published last must not create anything either.
	e2etest.WaitFor(t, "intake drained", 30*time.Second, func() bool { return e.StreamMsgs(t, e.Env.Res.Intake) == 0 })

	unsubmitted := 0 // jobs that expired before their create
	t.Run("one terminal state per job, agreeing with the provider", func(t *testing.T) {
		truth := map[string]sim.Prediction{}
		for _, p := range e.Sim.Predictions() {
			truth[p.IdempotencyKey] = p
		}
		terminal := e.Log.Terminal()
		counts := map[state.State]int{}
		for id, w := range jobs {
			evs := terminal[id]
			require.Len(t, evs, 1, "job %s: exactly one terminal event", id)
			got := evs[0].State
			counts[got]++
			j, err := e.Env.Jobs.Get(context.Background(), id)
			require.NoError(t, err)
			require.Equal(t, got, j.State, "job %s: record and event agree", id)
			e2etest.RequirePublished(t, j, e.Log.Jobs()[id])
			if w.state != "" {
				require.Equal(t, w.state, got, "job %s", id)
			}
			p, ok := truth[j.IdempotencyKey]
			if !ok && got == state.Expired && j.RemoteID == "" && !j.SubmitInDoubt {
				// Its 3 s deadline passed while rate limits held its create
				// back: it expired without one.
				unsubmitted++
				continue
			}
			require.True(t, ok, "job %s was created at the provider", id)
			require.Equal(t, p.ID, j.RemoteID)
			switch got {
			case state.Succeeded, state.Failed, state.Canceled:
				require.Equal(t, string(got), p.Status, "job %s: Pollux says %s", id, got)
			case state.Lost:
				require.True(t, p.Lost, "job %s lost by Pollux but not by the provider", id)
			case state.Expired:
				require.True(t, p.NeverFinish, "job %s expired but would have finished", id)
			}
		}
		t.Logf("final states: %v", counts)
		require.Positive(t, counts[state.Succeeded])
		require.Positive(t, counts[state.Failed])
		require.Positive(t, counts[state.Lost], "the provider lost some jobs")
	})

	t.Run("one create per idempotency key, no call before Retry-After", func(t *testing.T) {
		st := e.Sim.Stats()
		t.Logf("sim: creates %d, status calls %d, 429s %d, 5xx %d, 404s %d, webhooks sent %d (missing %d, duplicated %d)",
			st.Creates, st.StatusCalls, st.RateLimited, st.ServerErrors, st.NotFound, st.WebhooksSent, st.WebhooksMissing, st.WebhooksDuplicated)
		require.Equal(t, len(jobs)-unsubmitted, st.IdempotencyKeys, "every job created but those that expired before their create")
		require.Equal(t, 0, st.DuplicateCreates)
		require.Equal(t, 1, st.MaxCreatesPerKey)
		require.Equal(t, 0, st.CallsBeforeRetryAfter)
		require.Positive(t, st.RateLimited, "the run met 429s")
		require.Positive(t, st.ServerErrors, "the run met 5xx")
		require.Positive(t, st.WebhooksMissing)
		require.Positive(t, st.WebhooksDuplicated)
	})

	t.Run("events in order per job", func(t *testing.T) {
		for id, evs := range e.Log.Jobs() {
			if _, ok := jobs[id]; !ok {
				continue
			}
			// A job that waited (the route paused by a 429, a full level)
			// says so first: waiting events, then submitted.
			first := 0
			for first < len(evs)-1 && evs[first].Type == events.EventWaiting {
				first++
			}
			if first == len(evs)-1 && evs[first].Type == events.EventExpired {
				continue // expired before it was submitted
			}
			require.Equal(t, events.EventSubmitted, evs[first].Type, "job %s starts with submitted, after any waiting", id)
			for i, ev := range evs {
				require.Equal(t, uint64(i+1), ev.Seq, "job %s: events numbered 1.. without gaps or repeats, in stream order", id)
			}
		}
	})

	t.Run("the fleet learned each model's durations", func(t *testing.T) {
		finished := map[string]int{}
		for id := range jobs {
			j, err := e.Env.Jobs.Get(context.Background(), id)
			require.NoError(t, err)
			if j.State == state.Succeeded || j.State == state.Failed {
				finished[j.Model]++
			}
		}
		for model, n := range finished {
			e2etest.WaitFor(t, "learned "+model, 10*time.Second, func() bool {
				total, _ := e.Env.Stats.Lookup(dev.RouteName, model, "", 0)
				return total != nil && total.Count() == uint64(n)
			})
		}
	})

	t.Run("no check message left", func(t *testing.T) {
		e2etest.WaitFor(t, "checks stream empty", 30*time.Second, func() bool { return e.StreamMsgs(t, e.Env.Res.Checks) == 0 })
	})

	t.Run("polls counted exactly, in the records and the metric", func(t *testing.T) {
		e2etest.WaitFor(t, "checks stream empty", 30*time.Second, func() bool { return e.StreamMsgs(t, e.Env.Res.Checks) == 0 })
		byKey := map[string][]sim.Prediction{}
		for _, p := range e.Sim.Predictions() {
			byKey[p.IdempotencyKey] = append(byKey[p.IdempotencyKey], p)
		}
		ids := make([]string, 0, len(jobs))
		for id := range jobs {
			ids = append(ids, id)
		}
		e2etest.RequireExactPolls(t, e.Env.Jobs, ids, byKey)
		// Every status call is one of these jobs': the count of finished
		// jobs' polls is the provider's count of status calls.
		require.InDelta(t, float64(e.Sim.Stats().StatusCalls), histogramSum(t, e, "pollux_finished_job_polls_total"), 0)
	})

	t.Run("malformed intake is rejected by name", func(t *testing.T) {
		e2etest.WaitFor(t, "every rejection", 30*time.Second, func() bool { return len(e.Log.Rejections()) >= len(malformed) })
		rej := e.Log.Rejections()
		require.Len(t, rej, len(malformed))
		for _, m := range malformed {
			found := false
			for _, ev := range rej {
				r := ev.Rejection
				if r.Subject == m.subject && r.Field == m.field && strings.Contains(r.Error, m.contains) {
					found = true
				}
			}
			require.True(t, found, "a rejection of %.60s on %s naming %q", m.body, m.subject, m.field)
		}
	})
}

// TestWebhooksBeforeTheCreateAnswer runs an instant model whose provider
// sends each job's completion webhook before it answers the create: the
// record does not know the remote id yet when the webhook comes, and the
// webhook must still be what finds every job done — kept until the
// create's answer is recorded, then applied — not a reconciliation poll
// half a minute later.
func TestWebhooksBeforeTheCreateAnswer(t *testing.T) {
	t.Parallel()
	e := e2etest.Start(t, dev.StackConfig{
		Sim: sim.Config{TimeScale: 1, Seed: 5, CreateDelay: e2etest.D(200 * time.Millisecond),
			Default: sim.Model{QueueMedian: e2etest.D(time.Millisecond), RunMedian: e2etest.D(time.Millisecond)}},
		Route: config.Route{Workers: config.Workers{Submit: 8}},
	})
	ids := e2etest.SubmitN(t, e, "wb", 100, func(int) (string, float64) { return "instant/model", 0 })
	e.WaitTerminal(t, ids, 60*time.Second)
	for _, id := range ids {
		j, err := e.Env.Jobs.Get(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, state.FromWebhook, j.DetectedBy, "job %s: found by its webhook", id)
		require.Zero(t, j.Polls, "job %s: no poll needed", id)
	}
	st := e.Sim.Stats()
	require.GreaterOrEqual(t, st.WebhooksSent, len(ids))
	require.Zero(t, st.StatusCalls)
	require.Zero(t, histogramSum(t, e, "pollux_webhooks_dropped_total"), "no delivery dropped")
}

// histogramSum is the sum of a metric of the stack's: a histogram's sum,
// or a counter's total, over its labels.
func histogramSum(t *testing.T, e *e2etest.Env, name string) float64 {
	t.Helper()
	families, err := e.Metrics.Registry().Gather()
	require.NoError(t, err)
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			switch {
			case m.GetHistogram() != nil:
				sum += m.GetHistogram().GetSampleSum()
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestResubmissionMinutesLater shows that deduplication outlives the
// stream's duplicate window: a job submitted again after it finished is
// not submitted again.
func TestResubmissionMinutesLater(t *testing.T) {
	t.Parallel()
	e := e2etest.Start(t, dev.StackConfig{Sim: sim.Config{TimeScale: e2etest.Scale, Default: sim.Model{QueueMedian: e2etest.D(time.Second), RunMedian: e2etest.D(5 * time.Second)}}})
	msg := events.Submit{V: 1, IdempotencyKey: "once", Model: "a/b", Input: json.RawMessage(`{}`)}
	id := events.KeyID(dev.RouteName, "once")
	e.Publish(t, e.NS.Submit(dev.RouteName), msg)
	e2etest.WaitFor(t, "terminal", 30*time.Second, func() bool { return len(e.Log.Terminal()[id]) == 1 })

	// Far beyond Nats-Msg-Id deduplication: a distinct message, later.
	e.Publish(t, e.NS.Submit(dev.RouteName), msg)
	e2etest.WaitFor(t, "intake drained", 10*time.Second, func() bool { return e.StreamMsgs(t, e.Env.Res.Intake) == 0 })
	require.Equal(t, 1, e.Sim.Stats().Creates)
	require.Len(t, e.Log.Terminal()[id], 1)
}

// TestTrack follows a job submitted elsewhere.
func TestTrack(t *testing.T) {
	t.Parallel()
	e := e2etest.Start(t, dev.StackConfig{Sim: sim.Config{TimeScale: e2etest.Scale, Default: sim.Model{QueueMedian: e2etest.D(time.Second), RunMedian: e2etest.D(10 * time.Second)}}})
	req, err := http.NewRequest(http.MethodPost, e.SimURL+"/v1/models/a/b/predictions", bytes.NewReader([]byte(`{"input":{}}`)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+e.SimToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var p struct{ ID string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	require.NoError(t, resp.Body.Close())

	e.Publish(t, e.NS.Track(dev.RouteName), events.Track{V: 1, ID: "tracked-1", RemoteID: p.ID, Model: "a/b"})
	e.Publish(t, e.NS.Track(dev.RouteName), events.Track{V: 1, ID: "tracked-1", RemoteID: p.ID, Model: "a/b"}) // duplicate
	// Intake is handled concurrently: the conflicting request goes once the
	// job exists, or it could be the one that creates it.
	e2etest.WaitFor(t, "the job tracked", 10*time.Second, func() bool {
		_, err := e.Env.Jobs.Get(context.Background(), "tracked-1")
		return err == nil
	})
	e.Publish(t, e.NS.Track(dev.RouteName), events.Track{V: 1, ID: "tracked-1", RemoteID: "someone-else", Model: "a/b"})
	e2etest.WaitFor(t, "terminal", 30*time.Second, func() bool { return len(e.Log.Terminal()["tracked-1"]) == 1 })
	j, err := e.Env.Jobs.Get(context.Background(), "tracked-1")
	require.NoError(t, err)
	require.Equal(t, state.Succeeded, j.State)
	require.True(t, j.Tracked)
	require.Equal(t, 1, e.Sim.Stats().Creates, "tracking never submits")
	e2etest.WaitFor(t, "the conflicting track rejected", 10*time.Second, func() bool { return len(e.Log.Rejections()) == 1 })
	require.Equal(t, "id", e.Log.Rejections()[0].Rejection.Field)
}
