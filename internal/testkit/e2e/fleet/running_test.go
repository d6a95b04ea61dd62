package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// TestRunningSlotsHoldAcrossTheFleet runs real binaries — two ingest and
// two poller processes and the webhook receiver — over three routes that
// reach one provider account with `running: 5`, and SIGKILLs them at
// random moments while 300 jobs go through. The simulated provider, which
// enforces no cap of its own here, never has more than 5 jobs running (its
// ground truth), every job finishes, and once the fleet is idle every
// running slot is free again: those a killed process left are repaired.
func TestRunningSlotsHoldAcrossTheFleet(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	const running, perRoute = 5, 100
	routes := []string{"gen-a", "gen-b", "gen-c"}
	var conf strings.Builder
	fmt.Fprintf(&conf, `
streams: {intake_ack_wait: 6s, check_ack_wait: 4s}
running_repair: {interval: 2s, grace: 5s}
accounts:
  acct:
    budgets: {running: %d}
routes:
`, running)
	for _, r := range routes {
		fmt.Fprintf(&conf, `  %s:
    kind: replicate
    account: acct
    base_url: http://{{sim}}
    token_env: SIM_TOKEN
    webhook_url: http://{{webhook}}/webhooks/%s
    workers: {submit: 4, status: 8}
    options: {idempotent: true}
`, r, r)
	}
	f := e2etest.StartSimFleet(t, e2etest.SimFleetConfig{
		Token:     "account-token",
		TimeScale: 50,
		Sim: `
time_scale: 50
seed: 16
latency: 2ms
default: {queue_median: 1s, queue_sigma: 0.5, run_median: 8s, run_sigma: 0.5, fail_rate: 0.05}
faults: {webhook_missing_rate: 0.3}
`,
		Config: conf.String(),
	})
	js := f.JS
	var n atomic.Int64
	var sups []*e2etest.Supervisor
	for _, name := range []string{"ingest-a", "ingest-b", "poller-a", "poller-b", "webhook"} {
		service := strings.TrimSuffix(strings.TrimSuffix(name, "-a"), "-b")
		sups = append(sups, e2etest.Supervise(t, name, func() *e2etest.Proc { return f.Launch(fmt.Sprintf("%s-%d", name, n.Add(1)), service) }))
	}
	log := e2etest.FollowFleet(t, js)

	var ids []string
	for i := range perRoute {
		for _, r := range routes {
			key := fmt.Sprintf("run-%s-%04d", r, i)
			ids = append(ids, events.KeyID(r, key))
			msg, _ := json.Marshal(events.Submit{V: 1, IdempotencyKey: key, Model: "acct/model", Input: json.RawMessage(`{}`)})
			_, err := js.Publish(context.Background(), events.Default.Submit(r), msg)
			require.NoError(t, err)
		}
	}

	stopKilling := e2etest.KillAtRandom(sups, rand.New(rand.NewPCG(16, 16)), 3*time.Second, 2*time.Second)
	e2etest.WaitTerminal(t, js, log, ids, 240*time.Second)
	kills := stopKilling()

	st := e2etest.SimStats(t, f.SimURL)
	require.LessOrEqual(t, st.PeakRunning, running, "the provider never had more jobs running than the account's cap")
	require.Equal(t, len(ids), st.IdempotencyKeys, "every job was created once")
	stream, err := js.Stream(context.Background(), events.Default.RunningStream(events.LevelAccount, "acct"))
	require.NoError(t, err)
	e2etest.WaitFor(t, "every running slot free", 60*time.Second, func() bool {
		info, err := stream.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
	t.Logf("%d jobs over 3 routes of one account, running cap %d: provider peak %d, %d kills", len(ids), running, st.PeakRunning, kills)
}

// TestGlobalRunningCapAcrossAccountsChangedLive runs two ingest
// processes, each serving the route of a different account, under one
// global running cap of 4; both accounts reach the same simulated
// provider, whose ground truth shows the global cap held across the
// processes. Midway the cap is lowered to 2 in the configuration and one
// ingest process restarts with it: nothing is lost, and once the jobs
// running then end, the provider never has more than 2 running.
func TestGlobalRunningCapAcrossAccountsChangedLive(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	const perRoute = 30
	route := func(name, account string) string {
		return fmt.Sprintf(`  %s:
    kind: replicate
    account: %s
    base_url: http://{{sim}}
    token_env: SIM_TOKEN
    options: {idempotent: true}
`, name, account)
	}
	conf := func(running int, routes ...string) string {
		return fmt.Sprintf("budgets: {running: %d}\naccounts: {a: {}, b: {}}\nroutes:\n%s", running, strings.Join(routes, ""))
	}
	// The poller serves both routes (pollux.yaml), each ingest one.
	f := e2etest.StartSimFleet(t, e2etest.SimFleetConfig{
		Token:     "global-token",
		TimeScale: 50,
		Sim: `
time_scale: 50
seed: 17
default: {queue_median: 1s, run_median: 10s, run_sigma: 0.5}
`,
		Config: conf(4, route("ra", "a"), route("rb", "b")),
	})
	js := f.JS
	confA, confB := f.WriteConfig("a.yaml", conf(4, route("ra", "a"))), f.WriteConfig("b.yaml", conf(4, route("rb", "b")))
	ingestA := f.Launch("ingest-a", "ingest", "POLLUX_CONFIG="+confA)
	f.Launch("ingest-b", "ingest", "POLLUX_CONFIG="+confB)
	f.Launch("poller", "poller")
	log := e2etest.FollowFleet(t, js)

	var ids []string
	for i := range perRoute {
		for _, r := range []string{"ra", "rb"} {
			key := fmt.Sprintf("global-%s-%03d", r, i)
			ids = append(ids, events.KeyID(r, key))
			msg, _ := json.Marshal(events.Submit{V: 1, IdempotencyKey: key, Model: "g/model", Input: json.RawMessage(`{}`)})
			_, err := js.Publish(context.Background(), events.Default.Submit(r), msg)
			require.NoError(t, err)
		}
	}
	e2etest.WaitFor(t, "a third of the jobs done", 120*time.Second, func() bool { return len(log.Terminal()) >= len(ids)/3 })
	before := e2etest.SimStats(t, f.SimURL)
	require.LessOrEqual(t, before.PeakRunning, 4, "two processes, two accounts, one global cap")
	require.Positive(t, before.PeakRunning)

	// Lower the cap and restart one ingest process with it.
	f.WriteConfig("a.yaml", conf(2, route("ra", "a")))
	f.WriteConfig("b.yaml", conf(2, route("rb", "b")))
	ingestA.Kill(t)
	f.Launch("ingest-a2", "ingest", "POLLUX_CONFIG="+confA)
	stream, err := js.Stream(context.Background(), events.Default.RunningStream(events.LevelGlobal, ""))
	require.NoError(t, err)
	e2etest.WaitFor(t, "the running jobs of the old cap end", 60*time.Second, func() bool {
		info, err := stream.Info(context.Background())
		return err == nil && info.Config.MaxMsgs == 2 && info.State.Msgs <= 2
	})
	resp, err := http.Post(f.SimURL+"/_sim/reset-stats", "", nil)
	require.NoError(t, err)
	_ = resp.Body.Close()

	e2etest.WaitTerminal(t, js, log, ids, 180*time.Second)
	after := e2etest.SimStats(t, f.SimURL)
	require.LessOrEqual(t, after.PeakRunning, 2, "the lowered cap holds")
	require.Positive(t, after.PeakRunning)
	var truth []sim.Prediction
	require.NoError(t, json.Unmarshal([]byte(e2etest.Get(t, f.SimURL+"/_sim/predictions")), &truth))
	keys := map[string]int{}
	for _, p := range truth {
		keys[p.IdempotencyKey]++
	}
	require.Len(t, keys, len(ids), "every job created, nothing lost")
	for k, n := range keys {
		require.Equal(t, 1, n, "key %s created once", k)
	}
	e2etest.WaitFor(t, "every running slot free", 30*time.Second, func() bool {
		info, err := stream.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
	t.Logf("peak %d under the cap of 4, %d after it was lowered to 2; %d jobs", before.PeakRunning, after.PeakRunning, len(ids))
}
