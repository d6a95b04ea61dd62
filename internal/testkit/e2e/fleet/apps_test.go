package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/events"
)

// TestAppsQuotasHoldAcrossGateways runs three ingest processes, each with
// its front door, and a poller, against the simulated provider; 50 clients
// of two apps create jobs through all three as fast as they can for a few
// seconds. Each app's admitted requests stay within its fleet-wide rate
// (apps.<name>.rate) ± one second's worth — not three times it —, its
// jobs at the provider (as the jobs index shows them to an operator: a
// remote id, not ended) never pass its max_running, and its jobs not yet
// there never pass its max_waiting and the creates under way (at most
// max_running of them: a job's create holds its running slot).
func TestAppsQuotasHoldAcrossGateways(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	t.Parallel()
	type app struct {
		name, token                  string
		rate, maxRunning, maxWaiting int
		clients                      int
	}
	apps := []app{
		{name: "studio", token: "e2e-studio-token-0123456789", rate: 20, maxRunning: 3, maxWaiting: 4, clients: 30},
		{name: "rival", token: "e2e-rival-token-0123456789", rate: 10, maxRunning: 2, maxWaiting: 3, clients: 20},
	}
	const admin = "e2e-admin-token-0123456789"
	const window = 4 * time.Second
	f := e2etest.StartSimFleet(t, e2etest.SimFleetConfig{
		Token: "sim-secret-token", TimeScale: 50,
		Sim: "time_scale: 50\nseed: 3\nlatency: 5ms\ndefault: {queue_median: 5s, queue_sigma: 0.3, run_median: 20s, run_sigma: 0.3}\n",
		Config: fmt.Sprintf(`
routes:
  sim:
    kind: replicate
    base_url: http://{{sim}}
    token_env: SIM_TOKEN
    workers: {submit: 8, status: 16}
    options: {idempotent: true}
apps:
  %s: {rate: %d, max_running: %d, max_waiting: %d}
  %s: {rate: %d, max_running: %d, max_waiting: %d}
`, apps[0].name, apps[0].rate, apps[0].maxRunning, apps[0].maxWaiting, apps[1].name, apps[1].rate, apps[1].maxRunning, apps[1].maxWaiting),
	})
	tokens := filepath.Join(f.Dir, "tokens")
	lines := admin + " admin\n"
	for _, a := range apps {
		lines += a.token + " app=" + a.name + "\n"
	}
	require.NoError(t, os.WriteFile(tokens, []byte(lines), 0o600))
	f.Launch("poller", "poller")
	doors, _ := gateways(t, f, tokens, 3)
	client := &http.Client{Timeout: 10 * time.Second}
	do := func(method, url, token, body string) (int, []byte) {
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	// The operator samples each app's jobs at the provider and not yet
	// there while the clients run.
	stop := make(chan struct{})
	peak, peakWaiting := map[string]*atomic.Int64{}, map[string]*atomic.Int64{}
	for _, a := range apps {
		peak[a.name], peakWaiting[a.name] = new(atomic.Int64), new(atomic.Int64)
	}
	raise := func(p *atomic.Int64, c int64) {
		if p != nil && c > p.Load() {
			p.Store(c)
		}
	}
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			status, body := do(http.MethodGet, doors[0]+"/v1/jobs?state=pending,queued,running&limit=500", admin, "")
			if status != http.StatusOK {
				continue
			}
			var page struct {
				Jobs []struct {
					App      string
					RemoteID string `json:"remote_id"`
				}
			}
			if json.Unmarshal(body, &page) != nil {
				continue
			}
			running, waiting := map[string]int64{}, map[string]int64{}
			for _, j := range page.Jobs {
				if j.RemoteID != "" {
					running[j.App]++
				} else {
					waiting[j.App]++
				}
			}
			for _, a := range apps {
				raise(peak[a.name], running[a.name])
				raise(peakWaiting[a.name], waiting[a.name])
			}
		}
	})

	admitted := map[string]*atomic.Int64{}
	created := map[string]*atomic.Int64{}
	var wg sync.WaitGroup
	end := time.Now().Add(window)
	for _, a := range apps {
		admitted[a.name], created[a.name] = new(atomic.Int64), new(atomic.Int64)
		for c := range a.clients {
			wg.Go(func() {
				for i := 0; time.Now().Before(end); i++ {
					body := fmt.Sprintf(`{"route":"sim","v":1,"model":"acme/video","input":{},"idempotency_key":"%s-%d-%d"}`, a.name, c, i)
					status, answer := do(http.MethodPost, doors[(c+i)%len(doors)]+"/v1/jobs", a.token, body)
					switch {
					case status == http.StatusAccepted:
						admitted[a.name].Add(1)
						created[a.name].Add(1)
					case status == http.StatusTooManyRequests && strings.Contains(string(answer), `"budget_exceeded"`):
						admitted[a.name].Add(1) // past the rate, refused by max_waiting
					case status == http.StatusTooManyRequests: // the rate's refusal
					case status != 0:
						t.Errorf("app %s: %d %s", a.name, status, answer)
					}
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	for _, a := range apps {
		got := float64(admitted[a.name].Load())
		// The rate over the window, within a second's worth either way
		// (a second's leases are there at the start), where three
		// unshared quotas would admit three times as much.
		want := float64(a.rate) * window.Seconds()
		t.Logf("app %s: %v creates answered in %s (rate %d/s: %v expected), %d jobs made, at most %d at the provider (max_running %d), %d not yet (max_waiting %d)",
			a.name, got, window, a.rate, want, created[a.name].Load(), peak[a.name].Load(), a.maxRunning, peakWaiting[a.name].Load(), a.maxWaiting)
		require.LessOrEqual(t, got, want+float64(a.rate), "app %s: within its fleet-wide rate and one second's worth", a.name)
		// Below it only by what a loaded machine's clients fail to ask:
		// each request of a rated app waits on a lease of the fleet's (a
		// NATS round trip), and make test runs the fault suites beside
		// this one on 2 cores (65, then 32 of studio's 80 seen). The bound
		// is that the rate is served at all, not starved.
		require.GreaterOrEqual(t, got, want/4, "app %s: its rate is served", a.name)
		require.Positive(t, created[a.name].Load())
		require.Positive(t, peak[a.name].Load())
		require.LessOrEqual(t, peak[a.name].Load(), int64(a.maxRunning), "app %s: never more jobs at the provider than its max_running", a.name)
		require.LessOrEqual(t, peakWaiting[a.name].Load(), int64(a.maxWaiting+a.maxRunning), "app %s: never more jobs waiting than its max_waiting (and its creates under way)", a.name)
	}
}

// TestADayBudgetHoldsThroughAKill: a day budget with 50 clients creating
// through three gateway processes, one SIGKILLed midway: the jobs the
// provider made, the creates answered 202 and the day's spend never pass
// the budget (per-job prices: admissions are compare-and-sets of the
// fleet's total, so a kill can leave an estimate counted, never one
// uncounted); and the app's waiting slots, which the killed gateway may
// have held for creates it never published, are all free once the jobs
// ended (repaired).
func TestADayBudgetHoldsThroughAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	t.Parallel()
	const (
		app    = "studio"
		token  = "e2e-budget-token-0123456789"
		admin  = "e2e-budget-admin-0123456789"
		budget = 30
		window = 3 * time.Second
	)
	f := e2etest.StartSimFleet(t, e2etest.SimFleetConfig{
		Token: "sim-secret-token", TimeScale: 50,
		Sim: "time_scale: 50\nseed: 4\nlatency: 5ms\ndefault: {queue_median: 2s, queue_sigma: 0.3, run_median: 10s, run_sigma: 0.3}\n",
		Config: fmt.Sprintf(`
running_repair: {interval: 1s, grace: 5s}
routes:
  sim:
    kind: replicate
    base_url: http://{{sim}}
    token_env: SIM_TOKEN
    workers: {submit: 8, status: 16}
    options: {idempotent: true}
    prices: {"*": {per: job, price: 1}}
apps:
  %s: {budgets: {day: %d}, max_waiting: 1000}
`, app, budget),
	})
	tokens := filepath.Join(f.Dir, "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte(admin+" admin\n"+token+" app="+app+"\n"), 0o600))
	f.Launch("poller", "poller")
	doors, procs := gateways(t, f, tokens, 3)
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(url, body string) int {
		req, err := http.NewRequest(http.MethodPost, url+"/v1/jobs", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	var accepted, refused atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(window)
	for c := range 50 {
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				body := fmt.Sprintf(`{"route":"sim","v":1,"model":"acme/video","input":{},"idempotency_key":"b-%d-%d"}`, c, i)
				// Retried with the same key on the next door when a door is
				// gone or unsure: the same job.
				for try := 0; try < 3; try++ {
					status := post(doors[(c+i+try)%len(doors)], body)
					if status == http.StatusAccepted {
						accepted.Add(1)
						break
					}
					if status == http.StatusTooManyRequests {
						refused.Add(1)
						break
					}
				}
			}
		})
	}
	// Kill a gateway while creates are admitted: once a third of the
	// budget is spent, with the rest still to come.
	e2etest.WaitFor(t, "a third of the day budget admitted", window, func() bool { return accepted.Load() >= budget/3 })
	procs[1].Kill(t)
	wg.Wait()

	// Every job the provider took ends; then the day's total is final.
	e2etest.WaitFor(t, "the jobs ended", 60*time.Second, func() bool {
		req, _ := http.NewRequest(http.MethodGet, doors[0]+"/v1/jobs?state=pending,queued,running&limit=1", nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		defer func() { _ = resp.Body.Close() }()
		var page struct{ Total int }
		return json.NewDecoder(resp.Body).Decode(&page) == nil && page.Total == 0
	})
	st := e2etest.SimStats(t, f.SimURL)
	req, err := http.NewRequest(http.MethodGet, doors[0]+"/v1/spend?days=1", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := client.Do(req)
	require.NoError(t, err)
	var report struct {
		Apps []struct {
			App  string
			Days []struct{ Spent float64 }
		}
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&report))
	_ = resp.Body.Close()
	require.Len(t, report.Apps, 1)
	spent := report.Apps[0].Days[0].Spent
	made := st.Creates - st.DuplicateCreates
	t.Logf("budget %d: %d creates answered 202, %d refused, %d jobs made at the provider, %.0f spent (a gateway SIGKILLed at %s)",
		budget, accepted.Load(), refused.Load(), made, spent, window/3)
	require.LessOrEqual(t, accepted.Load(), int64(budget))
	require.LessOrEqual(t, made, budget, "the provider made no job past the budget")
	require.LessOrEqual(t, spent, float64(budget), "the day's spend never passes the budget")
	require.Positive(t, refused.Load())
	require.GreaterOrEqual(t, spent, float64(made), "every job made is counted")
	waiting, err := f.JS.Stream(context.Background(), events.Default.RunningStream(events.LevelAppWaiting, app))
	require.NoError(t, err)
	e2etest.WaitFor(t, "the app's waiting slots free", 30*time.Second, func() bool {
		info, err := waiting.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
}

// gateways launches n ingest processes of fleet f, each serving the front
// door with the tokens file, and returns their base URLs once each answers.
func gateways(t *testing.T, f *e2etest.SimFleet, tokens string, n int) ([]string, []*e2etest.Proc) {
	t.Helper()
	var doors []string
	var procs []*e2etest.Proc
	for i := range n {
		addr := fmt.Sprintf("127.0.0.1:%d", e2etest.FreePort(t))
		procs = append(procs, f.Launch(fmt.Sprint("ingest-", i), "ingest", "POLLUX_HTTP_ADDR="+addr, "POLLUX_HTTP_TOKENS_FILE="+tokens))
		url := "http://" + addr
		e2etest.WaitFor(t, "front door "+url, 30*time.Second, func() bool {
			resp, err := http.Get(url + "/v1/routes")
			if err != nil {
				return false
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusUnauthorized
		})
		doors = append(doors, url)
	}
	return doors, procs
}
