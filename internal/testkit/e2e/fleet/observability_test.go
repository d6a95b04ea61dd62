package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/events"
)

const (
	obsToken  = "r8_obs-token-SECRET-4f2a9c"
	obsSecret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
)

// TestObservability runs the three binaries as processes and checks what
// operators see: every /metrics endpoint passes promtool, a real Prometheus
// scraping them agrees with the simulated provider's ground truth, and no
// configured secret appears in any log line, even at debug level.
func TestObservability(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	promtool := lookTool(t, "promtool")
	prometheus := lookTool(t, "prometheus")
	f := e2etest.StartSimFleet(t, e2etest.SimFleetConfig{
		Token:     obsToken,
		TokenEnv:  "OBS_TOKEN",
		Env:       []string{"OBS_WEBHOOK_SECRET=" + obsSecret},
		TimeScale: 50,
		Sim: `
time_scale: 50
seed: 5
webhook_secret: ` + obsSecret + `
default: {queue_median: 2s, run_median: 20s, run_sigma: 0.3, fail_rate: 0.2}
models: {"slow/obs": {queue_median: 2s, run_median: 600s, run_sigma: 0.05}}
faults: {webhook_missing_rate: 0.3, rate_limit_rate: 0.01, retry_after: 1s}
`,
		Config: `
routes:
  sim:
    kind: replicate
    base_url: http://{{sim}}
    token_env: OBS_TOKEN
    webhook_secret_env: OBS_WEBHOOK_SECRET
    webhook_url: http://{{webhook}}/webhooks/sim
    options: {idempotent: true}
`,
	})
	dir, js := f.Dir, f.JS

	ports := map[string]int{"ingest": e2etest.FreePort(t), "poller": e2etest.FreePort(t), "webhook": e2etest.FreePort(t)}
	logs := map[string]*e2etest.Proc{}
	for name, port := range ports {
		logs[name] = f.Launch(name, name, "POLLUX_LOG_LEVEL=debug", "POLLUX_CENSUS_EVERY=1s", fmt.Sprintf("POLLUX_METRICS_ADDR=127.0.0.1:%d", port))
	}

	promPort := e2etest.FreePort(t)
	var targets []string
	for _, port := range ports {
		targets = append(targets, fmt.Sprintf("%q", fmt.Sprintf("127.0.0.1:%d", port)))
	}
	promCfg := filepath.Join(dir, "prometheus.yaml")
	require.NoError(t, os.WriteFile(promCfg, []byte(fmt.Sprintf(`
global: {scrape_interval: 1s}
scrape_configs:
  - job_name: pollux
    static_configs: [{targets: [%s]}]
`, strings.Join(targets, ", "))), 0o600))
	e2etest.Launch(t, "prometheus", nil, prometheus, "--config.file="+promCfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort))

	log := e2etest.FollowFleet(t, js)
	// One slow job first (12 s at this time scale: a census every second
	// sees it open even on a loaded machine, where the fleet and
	// Prometheus start late), so that the oldest unresolved job has an age
	// worth measuring, then 60 quick ones.
	const n = 61
	for i := range n {
		model := "a/b"
		if i == 0 {
			model = "slow/obs"
		}
		msg, _ := json.Marshal(events.Submit{V: 1, IdempotencyKey: fmt.Sprintf("obs-%d", i), Model: model, Input: json.RawMessage(`{}`)})
		_, err := js.Publish(context.Background(), events.Default.Submit("sim"), msg)
		require.NoError(t, err)
	}
	e2etest.WaitFor(t, "every job terminal", 60*time.Second, func() bool { return len(log.Terminal()) == n })

	t.Run("every endpoint passes promtool check metrics", func(t *testing.T) {
		for name, port := range ports {
			body := e2etest.Get(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
			cmd := exec.Command(promtool, "check", "metrics")
			cmd.Stdin = strings.NewReader(body)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s: %s", name, out)
			require.Empty(t, strings.TrimSpace(string(out)), "%s: promtool complains", name)
		}
	})

	t.Run("Prometheus agrees with the provider's ground truth", func(t *testing.T) {
		st := e2etest.SimStats(t, f.SimURL)
		completions := 0
		for _, p := range predictions(t, f.SimURL) {
			if p.Status == "succeeded" || p.Status == "failed" {
				completions++
			}
		}
		require.Equal(t, n, completions)
		base := fmt.Sprintf("http://127.0.0.1:%d", promPort)
		// Wait for a scrape after the last job finished.
		e2etest.WaitFor(t, "Prometheus has every completion", 30*time.Second, func() bool {
			v, ok := query(t, base, `sum(pollux_polls_per_completion_count)`)
			return ok && v == n
		})
		polls, _ := query(t, base, `sum(pollux_polls_per_completion_sum)`)
		require.Equal(t, float64(st.StatusCalls), polls, "polls per completion counts every status call the provider saw")
		delays, _ := query(t, base, `sum(pollux_detection_delay_seconds_count)`)
		require.Equal(t, float64(completions), delays, "one detection delay per completion")
		byHook, _ := query(t, base, `sum(pollux_jobs_terminal_total{detected_by="webhook"})`)
		delivered := float64(st.WebhooksSent - st.WebhooksDuplicated)
		require.LessOrEqual(t, byHook, delivered, "a job is finished by its webhook at most once")
		caught, _ := query(t, base, `sum(pollux_reconciliation_catches_total)`)
		// Each missing webhook was caught by a poll, and so was each job
		// whose webhook came after a poll had seen its end (a loaded
		// machine makes a few): the catches beyond the missing webhooks
		// are exactly the delivered webhooks that did not finish a job.
		require.Equal(t, delivered-byHook, caught-float64(st.WebhooksMissing), "every completion seen once, by webhook or by poll")
		require.GreaterOrEqual(t, caught, float64(st.WebhooksMissing), "each missing webhook was caught by a poll")

		// Every 429 the provider answered is counted, submit and status
		// calls alike.
		require.Positive(t, st.ThrottleEpisodes, "the provider throttled")
		// (Each process is scraped on its own phase: wait for the scrapes
		// that follow the last call, as above.)
		var limited float64
		e2etest.WaitFor(t, "Prometheus has every rate limit the provider answered", 30*time.Second, func() bool {
			limited = 0
			for _, m := range []string{"pollux_provider_call_seconds_count", "pollux_status_call_seconds_count"} {
				v, _ := query(t, base, `sum(`+m+`{class="rate_limited"})`) // none: 0
				limited += v
			}
			return limited >= float64(st.RateLimited)
		})
		require.Equal(t, float64(st.RateLimited), limited, "rate limits counted as the provider answered them (%d episodes)", st.ThrottleEpisodes)

		// Detection delays: from the provider's completion to the terminal
		// event, job by job, summed.
		completedAt := map[string]time.Time{}
		for _, p := range predictions(t, f.SimURL) {
			if p.CompletedAt != nil {
				completedAt[p.ID] = *p.CompletedAt
			}
		}
		var truth float64
		for id, evs := range log.Terminal() {
			end := evs[len(evs)-1]
			done, ok := completedAt[end.Job.RemoteID]
			require.True(t, ok, "job %s: the provider completed %s", id, end.Job.RemoteID)
			truth += max(end.Job.DetectedAt.Sub(done).Seconds(), 0)
		}
		delaySum, _ := query(t, base, `sum(pollux_detection_delay_seconds_sum)`)
		t.Logf("%v rate limits counted (%d episodes); detection delays %.3f s summed, %.3f s by the provider's clock", limited, st.ThrottleEpisodes, delaySum, truth)
		require.InDelta(t, truth, delaySum, 0.001*n, "the detection delays are the provider's completions to the terminal events")

		// The oldest unresolved job's age, census by census: each value is
		// the age, at its census, of a job the provider had open then,
		// no younger than any job surely open then (by Pollux's events),
		// no older than the oldest job possibly open (by the provider's
		// creation times), and within a create call of the latter.
		createdAt := map[string]time.Time{}
		for _, p := range predictions(t, f.SimURL) {
			createdAt[p.ID] = p.CreatedAt
		}
		type span struct{ submitted, created, ended time.Time }
		var spans []span
		for id, evs := range log.Jobs() {
			ends := log.Terminal()[id]
			require.NotEmpty(t, ends, "job %s ended", id)
			end := ends[len(ends)-1]
			spans = append(spans, span{submitted: evs[0].Time, created: createdAt[end.Job.RemoteID], ended: end.Job.DetectedAt})
		}
		var lastEnd time.Time
		for _, sp := range spans {
			if sp.ended.After(lastEnd) {
				lastEnd = sp.ended
			}
		}
		poller := fmt.Sprintf("127.0.0.1:%d", ports["poller"])
		e2etest.WaitFor(t, "a census after the last job ended", 30*time.Second, func() bool {
			samples := queryRange(t, base, `pollux_unresolved_oldest_seconds{route="sim",instance="`+poller+`"}[5m]`)
			return len(samples) > 0 && samples[len(samples)-1].v == 0 && samples[len(samples)-1].at.After(lastEnd.Add(2*time.Second))
		})
		ages := queryRange(t, base, `pollux_unresolved_oldest_seconds{route="sim",instance="`+poller+`"}[5m]`)
		censusAge := map[time.Time]float64{}
		for _, s := range queryRange(t, base, `pollux_census_age_seconds{instance="`+poller+`"}[5m]`) {
			censusAge[s.at] = s.v
		}
		// margin: how far apart the census's clock and the events' may be;
		// lag: how long after a job's end a census may still count it
		// open (it reads the end from the events stream, behind on a busy
		// machine: make test saw 0.7 s).
		const margin, skew, lag = 300 * time.Millisecond, 50 * time.Millisecond, 2 * time.Second
		oldest := 0.0
		for _, s := range ages {
			ca, ok := censusAge[s.at]
			require.True(t, ok, "the census age scraped with the oldest age at %v", s.at)
			tc := s.at.Add(-time.Duration(ca * float64(time.Second)))
			var surely, possibly []span
			for _, sp := range spans {
				if !sp.submitted.After(tc.Add(-margin)) && !sp.ended.Before(tc.Add(margin)) {
					surely = append(surely, sp)
				}
				if !sp.submitted.After(tc.Add(margin)) && !sp.ended.Before(tc.Add(-margin-lag)) {
					possibly = append(possibly, sp)
				}
			}
			age := time.Duration(s.v * float64(time.Second))
			oldest = max(oldest, s.v)
			if len(possibly) == 0 {
				require.Zero(t, s.v, "census at %v: no job open", tc)
				continue
			}
			upper := tc.Sub(minTime(possibly, func(sp span) time.Time { return sp.created }))
			require.LessOrEqual(t, age, upper+skew, "census at %v: no older than the oldest job the provider had open", tc)
			if len(surely) > 0 {
				lower := tc.Sub(minTime(surely, func(sp span) time.Time { return sp.submitted }))
				require.GreaterOrEqual(t, age, lower-skew, "census at %v: no younger than a job surely open", tc)
				require.LessOrEqual(t, upper-age, time.Second, "census at %v: within a create call of the provider's creation time", tc)
			}
		}
		t.Logf("oldest unresolved: %d census samples, the largest %.1f s", len(ages), oldest)
		require.Greater(t, oldest, 3.0, "the slow job was seen unresolved")
	})

	t.Run("no secret in any log line", func(t *testing.T) {
		for name, p := range logs {
			b, err := os.ReadFile(p.LogFile)
			require.NoError(t, err)
			require.NotEmpty(t, b, name)
			for _, secret := range []string{obsToken, obsSecret, strings.TrimPrefix(obsSecret, "whsec_")} {
				require.NotContains(t, string(b), secret, "%s logged a secret", name)
			}
		}
	})
}

func lookTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("POLLUX_SKIP_PROMETHEUS") != "" {
			t.Skipf("%s not installed and POLLUX_SKIP_PROMETHEUS set", name)
		}
		t.Fatalf("%s not found: install Debian's prometheus package (apt-get install prometheus), or set POLLUX_SKIP_PROMETHEUS=1", name)
	}
	return p
}

// query runs an instant PromQL query and returns its single value.
func query(t *testing.T, base, q string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, false
	}
	defer func() { _ = resp.Body.Close() }()
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if json.NewDecoder(resp.Body).Decode(&r) != nil || len(r.Data.Result) != 1 {
		return 0, false
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

type sample struct {
	at time.Time
	v  float64
}

// queryRange evaluates a range selector of one series and returns its
// samples, oldest first.
func queryRange(t *testing.T, base, q string) []sample {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var r struct {
		Data struct {
			Result []struct {
				Values [][2]any `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
	if len(r.Data.Result) == 0 {
		return nil
	}
	require.Len(t, r.Data.Result, 1, "one series for %s", q)
	var out []sample
	for _, pt := range r.Data.Result[0].Values {
		ts, _ := pt[0].(float64)
		vs, _ := pt[1].(string)
		v, err := strconv.ParseFloat(vs, 64)
		require.NoError(t, err)
		out = append(out, sample{at: time.UnixMilli(int64(math.Round(ts * 1000))), v: v})
	}
	return out
}

// minTime is the earliest of f over xs (xs not empty).
func minTime[T any](xs []T, f func(T) time.Time) time.Time {
	m := f(xs[0])
	for _, x := range xs[1:] {
		if t := f(x); t.Before(m) {
			m = t
		}
	}
	return m
}

type simPrediction struct {
	ID          string     `json:"id"`
	Status      string     `json:"status"`
	CreatedAt   time.Time  `json:"created_at"`
	CompletedAt *time.Time `json:"completed_at"`
}

func predictions(t *testing.T, base string) []simPrediction {
	t.Helper()
	var ps []simPrediction
	require.NoError(t, json.Unmarshal([]byte(e2etest.Get(t, base+"/_sim/predictions")), &ps))
	return ps
}
