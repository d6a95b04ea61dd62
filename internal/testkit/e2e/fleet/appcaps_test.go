package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/faultpoint"
	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/events"
)

// TestAnAppsCapsHoldThroughKills runs two ingest and two poller processes
// and the webhook receiver over two routes that cap nothing of their own,
// and SIGKILLs them at random while 80 jobs of one app with
// `max_running: 3` go through. The simulated provider (its ground truth)
// never has more than 3 jobs running, every job is created once and ends,
// and once the fleet is idle the app's running and waiting slots are all
// free: those a killed process held are repaired, none leaks the app's
// capacity.
func TestAnAppsCapsHoldThroughKills(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	const maxRunning, perRoute = 3, 40
	routes := []string{"app-a", "app-b"}
	var conf strings.Builder
	fmt.Fprintf(&conf, `
streams: {intake_ack_wait: 6s, check_ack_wait: 4s}
running_repair: {interval: 2s, grace: 5s}
apps:
  studio: {max_running: %d, max_waiting: 1000}
routes:
`, maxRunning)
	for _, r := range routes {
		fmt.Fprintf(&conf, `  %s:
    kind: replicate
    base_url: http://{{sim}}
    token_env: SIM_TOKEN
    webhook_url: http://{{webhook}}/webhooks/%s
    workers: {submit: 4, status: 8}
    options: {idempotent: true}
`, r, r)
	}
	f := e2etest.StartSimFleet(t, e2etest.SimFleetConfig{
		Token:     "app-caps-token",
		TimeScale: 50,
		Sim: `
time_scale: 50
seed: 40
latency: 2ms
default: {queue_median: 1s, queue_sigma: 0.5, run_median: 8s, run_sigma: 0.5}
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
			key := fmt.Sprintf("cap-%s-%04d", r, i)
			ids = append(ids, events.AppKeyID(r, "studio", key))
			msg, _ := json.Marshal(events.Submit{V: 1, IdempotencyKey: key, App: "studio", Model: "studio/model", Input: json.RawMessage(`{}`)})
			_, err := js.Publish(context.Background(), events.Default.Submit(r), msg)
			require.NoError(t, err)
		}
	}

	stopKilling := e2etest.KillAtRandom(sups, rand.New(rand.NewPCG(40, 40)), 3*time.Second, 2*time.Second)
	e2etest.WaitTerminal(t, js, log, ids, 240*time.Second)
	kills := stopKilling()

	st := e2etest.SimStats(t, f.SimURL)
	require.LessOrEqual(t, st.PeakRunning, maxRunning, "the provider never had more of the app's jobs running than its max_running")
	require.Positive(t, st.PeakRunning)
	require.Equal(t, len(ids), st.IdempotencyKeys, "every job was created once")
	for _, level := range []string{events.LevelApp, events.LevelAppWaiting} {
		stream, err := js.Stream(context.Background(), events.Default.RunningStream(level, "studio"))
		require.NoError(t, err)
		e2etest.WaitFor(t, "every "+level+" slot free", 60*time.Second, func() bool {
			info, err := stream.Info(context.Background())
			return err == nil && info.State.Msgs == 0
		})
	}
	t.Logf("%d jobs of one app over 2 routes, max_running %d: provider peak %d, %d kills", len(ids), maxRunning, st.PeakRunning, kills)
}

// TestAWaitingSlotOfAKilledGatewayIsRepaired: a gateway dies (its crash
// point after-admit) right after it admitted a create — the app's
// waiting slot taken — and before it published it: no job will ever
// free that slot. The fleet's repair does, so the app's max_waiting of 1
// serves again; without it the app could create nothing more.
func TestAWaitingSlotOfAKilledGatewayIsRepaired(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	const token = "e2e-waiting-token-0123456789"
	f := e2etest.StartSimFleet(t, e2etest.SimFleetConfig{
		Token: "sim-secret-token", TimeScale: 50,
		Sim: "time_scale: 50\nseed: 5\ndefault: {queue_median: 1s, run_median: 5s}\n",
		Config: `
running_repair: {interval: 1s, grace: 5s}
routes:
  sim:
    kind: replicate
    base_url: http://{{sim}}
    token_env: SIM_TOKEN
    options: {idempotent: true}
apps:
  studio: {max_waiting: 1}
`,
	})
	tokens := filepath.Join(f.Dir, "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte(token+" app=studio\n"), 0o600))
	addr := fmt.Sprintf("127.0.0.1:%d", e2etest.FreePort(t))
	crashing := f.Launch("ingest-crashing", "ingest", "POLLUX_HTTP_ADDR="+addr, "POLLUX_HTTP_TOKENS_FILE="+tokens, faultpoint.Env+"=after-admit:1")
	create := func(url, key string) int {
		req, err := http.NewRequest(http.MethodPost, url+"/v1/jobs", strings.NewReader(`{"route":"sim","v":1,"model":"m","input":{},"idempotency_key":"`+key+`"}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	e2etest.WaitFor(t, "the crashing gateway's front door", 30*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/v1/routes")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return true
	})
	require.Zero(t, create("http://"+addr, "lost"), "the gateway died before it answered")
	e2etest.WaitFor(t, "the crashing gateway's exit", 10*time.Second, func() bool {
		return strings.Contains(e2etest.ReadLog(t, crashing), "faultpoint after-admit: crashing")
	})
	waiting, err := f.JS.Stream(context.Background(), events.Default.RunningStream(events.LevelAppWaiting, "studio"))
	require.NoError(t, err)
	info, err := waiting.Info(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 1, info.State.Msgs, "the dead gateway's admission holds the app's one waiting place")

	doors, _ := gateways(t, f, tokens, 1)
	f.Launch("poller", "poller")
	e2etest.WaitFor(t, "the waiting place repaired", 30*time.Second, func() bool {
		info, err := waiting.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
	require.Equal(t, http.StatusAccepted, create(doors[0], "next"), "the app creates again")
}
