package crash_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/platform/faultpoint"
	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// killRun is one run of the kill scenario.
func killRun(t *testing.T, idempotent bool) {
	f := e2etest.StartSimFleet(t, e2etest.SimFleetConfig{
		Token:     "kill-token",
		TimeScale: 50,
		Sim: fmt.Sprintf(`
time_scale: 50
seed: 31
latency: 5ms
default: {queue_median: 3s, queue_sigma: 0.5, run_median: 40s, run_sigma: 0.4, fail_rate: 0.1}
faults: {server_error_rate: 0.02, webhook_missing_rate: 0.2, not_idempotent: %v}
`, !idempotent),
		Config: fmt.Sprintf(`
streams: {intake_ack_wait: 6s, check_ack_wait: 4s}
routes:
  sim:
    kind: replicate
    base_url: http://{{sim}}
    token_env: SIM_TOKEN
    webhook_url: http://{{webhook}}/webhooks/sim
    workers: {submit: 4, status: 8}
    budgets:
      submit: {concurrency: 2, lease_wait: 5s}
      status: {concurrency: 4, lease_wait: 5s}
    options: {idempotent: %v}
`, idempotent),
	})
	js := f.JS

	// Ingest also crashes right after the provider accepted a job, before
	// the record knows its remote id: the window only idempotency (or
	// reconciliation) makes safe.
	var n atomic.Int64
	var sups []*e2etest.Supervisor
	for _, s := range []struct {
		name, service string
		env           []string
	}{
		{"ingest", "ingest", []string{faultpoint.Env + "=after-submit:0.03"}},
		{"poller-a", "poller", nil}, {"poller-b", "poller", nil}, {"webhook", "webhook", nil},
	} {
		sups = append(sups, e2etest.Supervise(t, s.name, func() *e2etest.Proc {
			return f.Launch(fmt.Sprintf("%s-%d", s.name, n.Add(1)), s.service, s.env...)
		}))
	}
	log := e2etest.FollowFleet(t, js)

	jobs := e2etest.Size(100, 2000)
	ids := make([]string, jobs)
	rnd := rand.New(rand.NewPCG(5, 5))
	for i := range jobs {
		key := fmt.Sprintf("kill-%05d", i)
		ids[i] = events.KeyID("sim", key)
		msg, _ := json.Marshal(events.Submit{V: 1, IdempotencyKey: key, Model: "kill/model", Input: json.RawMessage(`{}`)})
		for range 1 + rnd.IntN(2) {
			_, err := js.Publish(context.Background(), events.Default.Submit("sim"), msg)
			require.NoError(t, err)
		}
	}

	// Kill a random process every 1-2.5 s until every job is done.
	stopKilling := e2etest.KillAtRandom(sups, rnd, time.Second, 1500*time.Millisecond)
	e2etest.WaitTerminal(t, js, log, ids, time.Duration(e2etest.Size(150, 900))*time.Second)
	kills := stopKilling()

	st := e2etest.SimStats(t, f.SimURL)
	var truth []sim.Prediction
	require.NoError(t, json.Unmarshal([]byte(e2etest.Get(t, f.SimURL+"/_sim/predictions")), &truth))
	e := &e2etest.Env{JS: js, NS: events.Default, Log: log}
	o := verifyProcesses(t, e, ids, truth, st)
	o.Faults = kills + st.ServerErrors + st.WebhooksMissing
	restarts := 0
	for _, s := range sups {
		restarts += s.Starts() - 1
	}
	if idempotent {
		t.Logf("%d creates repeated a key after an interrupted submit (the provider deduplicated them)", st.DuplicateCreates)
	} else {
		require.Zero(t, st.DuplicateCreates, "one create per idempotency key: no in-doubt submission was retried")
	}
	// No lease left behind: once a dead holder's lease wait has passed,
	// every lease of both budgets can be taken.
	res, err := events.Default.Open(context.Background(), js)
	require.NoError(t, err)
	for _, kind := range []string{events.SlotSubmit, events.SlotStatus} {
		limit := map[string]int{events.SlotSubmit: 2, events.SlotStatus: 4}[kind]
		b, err := budget.Ensure(context.Background(), js, events.Default, res.Slots, "sim", kind,
			budget.Limit{Concurrency: limit, LeaseWait: 5 * time.Second}, events.Options{})
		require.NoError(t, err)
		b.Wait = 10 * time.Second
		var held []*budget.Lease
		for range limit {
			l, err := b.Acquire(context.Background())
			require.NoError(t, err, "%s lease %d came back", kind, len(held))
			held = append(held, l)
		}
		for _, l := range held {
			l.Release()
		}
	}
	label := "SIGKILL fleet (idempotent)"
	if !idempotent {
		label = "SIGKILL fleet (no idempotency)"
	}
	t.Logf("%d kills, %d restarts (crash points included)", kills, restarts)
	e2etest.ReportFaults(t, label, o)
}

// verifyProcesses is e2etest.Verify for a fleet of processes: the job
// records are read from the bucket of the server the processes share.
func verifyProcesses(t *testing.T, e *e2etest.Env, ids []string, truth []sim.Prediction, st sim.Stats) e2etest.Outcome {
	t.Helper()
	res, err := events.Default.Open(context.Background(), e.JS)
	require.NoError(t, err)
	owner := jobs.New(events.Default, e.JS, res, jobs.Config{})
	byKey := map[string][]sim.Prediction{}
	for _, p := range truth {
		byKey[p.IdempotencyKey] = append(byKey[p.IdempotencyKey], p)
	}
	o := e2etest.Outcome{Jobs: len(ids), States: map[state.State]int{}}
	terminal := e.Log.Terminal()
	all := e.Log.Jobs()
	for _, id := range ids {
		if len(terminal[id]) != 1 {
			t.Errorf("job %s: %d terminal events", id, len(terminal[id]))
			o.Lost++
			continue
		}
		got := terminal[id][0].State
		o.States[got]++
		j, err := owner.Get(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, got, j.State)
		for i, ev := range all[id] {
			require.Equal(t, uint64(i+1), ev.Seq, "job %s: events in order", id)
		}
		ps := byKey[j.IdempotencyKey]
		require.LessOrEqual(t, len(ps), 1, "job %s: one remote job per idempotency key", id)
		if len(ps) == 1 && (got == state.Succeeded || got == state.Failed) {
			require.Equal(t, string(got), ps[0].Status, "job %s", id)
			require.Equal(t, ps[0].ID, j.RemoteID)
			o.WorstDelay = max(o.WorstDelay, j.DetectedAt.Sub(j.CompletedAt))
		}
		if got == state.Lost {
			require.True(t, j.SubmitInDoubt, "job %s lost although its submission was not in doubt", id)
		}
	}
	e2etest.WaitFor(t, "no check message left", 60*time.Second, func() bool {
		info, err := res.Checks.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
	require.Zero(t, o.Lost, "jobs lost")
	return o
}

// TestChaosKillProcesses SIGKILLs ingest, pollers and the webhook receiver
// at random moments, and crashes ingest between the provider's create
// answer and the KV write, while jobs run; supervisors restart them. With
// an idempotent provider every job finishes; without, a job whose
// submission was interrupted is reported lost rather than submitted twice.
func TestChaosKillProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	t.Run("idempotent provider", func(t *testing.T) { t.Parallel(); killRun(t, true) })
	t.Run("provider without idempotency", func(t *testing.T) { t.Parallel(); killRun(t, false) })
}
