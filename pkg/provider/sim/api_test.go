package sim_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

func dur(d time.Duration) sim.Duration { return sim.Duration(d) }

// exact is a model whose times are exactly its medians.
func exact(queue, run time.Duration) sim.Model {
	return sim.Model{QueueMedian: dur(queue), RunMedian: dur(run)}
}

func TestLifecycleRealTime(t *testing.T) {
	t.Parallel()
	// 4 s queue and 4 s run at TimeScale 20: 200 ms each.
	e := setup(t, sim.Config{Default: exact(4*time.Second, 4*time.Second), TimeScale: 20})

	p := e.create(simpleBody)
	require.Equal(t, sim.StatusStarting, p.Status)
	require.Len(t, p.ID, 26)
	require.Regexp(t, `^[a-z0-9]{26}$`, p.ID)
	require.Equal(t, "owner/model", p.Model)
	require.Equal(t, "abc123", p.Version)
	require.Equal(t, map[string]any{"prompt": "a cat"}, p.Input)
	require.Equal(t, e.url+"/v1/predictions/"+p.ID, p.URLs.Get)
	require.Equal(t, e.url+"/v1/predictions/"+p.ID+"/cancel", p.URLs.Cancel)
	require.Nil(t, p.StartedAt)
	require.Nil(t, p.CompletedAt)
	require.Nil(t, p.Output)

	require.Eventually(t, func() bool {
		return e.mustGet(p.ID).Status == sim.StatusProcessing
	}, 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool {
		return e.mustGet(p.ID).Status == sim.StatusSucceeded
	}, 5*time.Second, 5*time.Millisecond)

	got := e.mustGet(p.ID)
	require.Equal(t, []string{"https://replicate.delivery/sim/" + p.ID + "/output.mp4"}, got.Output)
	require.Nil(t, got.Error)
	created, started, completed := parseTime(t, &got.CreatedAt), parseTime(t, got.StartedAt), parseTime(t, got.CompletedAt)
	require.Equal(t, 200*time.Millisecond, started.Sub(created))
	require.Equal(t, 200*time.Millisecond, completed.Sub(started))
	require.InDelta(t, 0.2, got.Metrics["predict_time"], 1e-9)
	require.Contains(t, got.Logs, "100%|██████████| 100/100")

	truth := e.truth(p.ID)
	require.Equal(t, sim.StatusSucceeded, truth.Status)
	require.Equal(t, completed, *truth.CompletedAt)
	require.Positive(t, truth.StatusCalls)
	require.Equal(t, truth.StatusCalls, e.sim.Stats().StatusCalls)
}

func TestLifecycleFakeClock(t *testing.T) {
	t.Parallel()
	const queue, run = 10 * time.Second, 100 * time.Second

	type step struct {
		at      time.Duration // since creation
		cancel  bool
		status  string
		started bool
		ended   time.Duration // completed_at since creation; 0 for none
		logs    string        // a substring of logs
	}
	tests := []struct {
		name        string
		model       sim.Model
		cancelAfter string
		steps       []step
	}{
		{
			name:  "succeeded",
			model: exact(queue, run),
			steps: []step{
				{at: 0, status: sim.StatusStarting},
				{at: 9 * time.Second, status: sim.StatusStarting},
				{at: 10 * time.Second, status: sim.StatusProcessing, started: true, logs: "  0%|          | 0/100"},
				{at: 55 * time.Second, status: sim.StatusProcessing, started: true,
					logs: " 45%|████▌     | 45/100 [00:45<00:55, 1.00it/s]"},
				{at: 110 * time.Second, status: sim.StatusSucceeded, started: true, ended: 110 * time.Second,
					logs: "100%|██████████| 100/100 [01:40<00:00, 1.00it/s]"},
				{at: time.Hour, cancel: true, status: sim.StatusSucceeded, started: true, ended: 110 * time.Second},
			},
		},
		{
			name:  "failed",
			model: sim.Model{QueueMedian: dur(queue), RunMedian: dur(run), FailRate: 1},
			steps: []step{
				{at: 50 * time.Second, status: sim.StatusProcessing, started: true},
				{at: 110 * time.Second, status: sim.StatusFailed, started: true, ended: 110 * time.Second, logs: sim.FailureMessage},
			},
		},
		{
			name:  "canceled while processing",
			model: exact(queue, run),
			steps: []step{
				{at: 30 * time.Second, cancel: true, status: sim.StatusCanceled, started: true, ended: 30 * time.Second,
					logs: " 20%|██        | 20/100"},
				{at: 200 * time.Second, status: sim.StatusCanceled, started: true, ended: 30 * time.Second},
			},
		},
		{
			name:  "canceled while starting",
			model: exact(queue, run),
			steps: []step{
				{at: 5 * time.Second, cancel: true, status: sim.StatusCanceled, ended: 5 * time.Second},
				{at: 20 * time.Second, status: sim.StatusCanceled, ended: 5 * time.Second},
			},
		},
		{
			name:        "aborted by Cancel-After",
			model:       exact(queue, run),
			cancelAfter: "5s",
			steps: []step{
				{at: 4 * time.Second, status: sim.StatusStarting},
				{at: 5 * time.Second, status: sim.StatusAborted, ended: 5 * time.Second},
				{at: 20 * time.Second, cancel: true, status: sim.StatusAborted, ended: 5 * time.Second},
			},
		},
		{
			name:        "canceled by Cancel-After",
			model:       exact(queue, run),
			cancelAfter: "1m",
			steps: []step{
				{at: 59 * time.Second, status: sim.StatusProcessing, started: true},
				{at: 60 * time.Second, status: sim.StatusCanceled, started: true, ended: time.Minute},
			},
		},
		{
			name:  "never finishes",
			model: sim.Model{QueueMedian: dur(queue), RunMedian: dur(run), NeverFinish: 1},
			steps: []step{
				{at: 24 * time.Hour, status: sim.StatusProcessing, started: true, logs: " 99%|█████████▉| 99/100"},
				{at: 25 * time.Hour, cancel: true, status: sim.StatusCanceled, started: true, ended: 25 * time.Hour},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			e := setup(t, sim.Config{Default: tt.model, Now: clk.Now})
			var hdr []string
			if tt.cancelAfter != "" {
				hdr = []string{"Cancel-After", tt.cancelAfter}
			}
			p := e.create(simpleBody, hdr...)
			created := parseTime(t, &p.CreatedAt)
			require.Equal(t, epoch, created)
			for _, st := range tt.steps {
				clk.Advance(epoch.Add(st.at).Sub(clk.Now()))
				var got wirePred
				if st.cancel {
					code, w := e.cancel(p.ID)
					require.Equal(t, http.StatusOK, code)
					got = w
				} else {
					got = e.mustGet(p.ID)
				}
				require.Equal(t, st.status, got.Status, "at %v", st.at)
				require.Equal(t, st.status, e.truth(p.ID).Status)
				if st.started {
					require.Equal(t, epoch.Add(queue), parseTime(t, got.StartedAt), "at %v", st.at)
				} else {
					require.Nil(t, got.StartedAt, "at %v", st.at)
				}
				if st.ended > 0 {
					require.Equal(t, epoch.Add(st.ended), parseTime(t, got.CompletedAt), "at %v", st.at)
					require.Equal(t, epoch.Add(st.ended), *e.truth(p.ID).CompletedAt)
				} else {
					require.Nil(t, got.CompletedAt, "at %v", st.at)
				}
				require.Contains(t, got.Logs, st.logs, "at %v", st.at)
				switch st.status {
				case sim.StatusFailed:
					require.NotNil(t, got.Error)
					require.Equal(t, sim.FailureMessage, *got.Error)
					require.Nil(t, got.Output)
				case sim.StatusSucceeded:
					require.Nil(t, got.Error)
					require.Len(t, got.Output, 1)
				}
			}
		})
	}
}

func TestModelRouting(t *testing.T) {
	t.Parallel()
	clk := newClock()
	e := setup(t, sim.Config{
		Default: exact(time.Second, 10*time.Second),
		Models: map[string]sim.Model{
			"acme/slow": exact(time.Second, time.Hour),
			"v42":       exact(time.Second, 2*time.Hour),
		},
		Now: clk.Now,
	})
	resp, b := e.do(http.MethodPost, "/v1/models/acme/slow/predictions", `{"input":{}}`)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", b)
	byRoute := decode[wirePred](t, b)
	require.Equal(t, "acme/slow", byRoute.Model)
	byVersion := e.create(`{"version":"acme/slow:deadbeef","input":{}}`)
	require.Equal(t, "acme/slow", byVersion.Model)
	require.Equal(t, "deadbeef", byVersion.Version)
	byID := e.create(`{"version":"v42","input":{}}`)
	unknown := e.create(`{"version":"nobody/knows","input":{}}`)

	clk.Advance(20 * time.Second)
	require.Equal(t, sim.StatusProcessing, e.mustGet(byRoute.ID).Status)
	require.Equal(t, sim.StatusProcessing, e.mustGet(byVersion.ID).Status)
	require.Equal(t, sim.StatusProcessing, e.mustGet(byID.ID).Status)
	require.Equal(t, sim.StatusSucceeded, e.mustGet(unknown.ID).Status)
	clk.Advance(time.Hour)
	require.Equal(t, sim.StatusSucceeded, e.mustGet(byVersion.ID).Status)
	require.Equal(t, sim.StatusProcessing, e.mustGet(byID.ID).Status)
}

func TestIdempotency(t *testing.T) {
	t.Parallel()
	t.Run("same key returns the prediction", func(t *testing.T) {
		t.Parallel()
		e := setup(t, sim.Config{})
		a := e.create(simpleBody, "Idempotency-Key", "job-1")
		b := e.create(simpleBody, "Idempotency-Key", "job-1")
		c := e.create(simpleBody, "Idempotency-Key", "job-2")
		d := e.create(simpleBody)
		require.Equal(t, a.ID, b.ID)
		require.NotEqual(t, a.ID, c.ID)
		require.NotEqual(t, c.ID, d.ID)
		st := e.sim.Stats()
		require.Equal(t, 4, st.Creates)
		require.Equal(t, 1, st.DuplicateCreates)
		require.Equal(t, 2, st.MaxCreatesPerKey)
		require.Equal(t, 2, st.IdempotencyKeys)
		require.Equal(t, 3, st.Predictions)
		require.Equal(t, "job-1", e.truth(a.ID).IdempotencyKey)
	})
	t.Run("NotIdempotent makes a new one", func(t *testing.T) {
		t.Parallel()
		e := setup(t, sim.Config{Faults: sim.Faults{NotIdempotent: true}})
		a := e.create(simpleBody, "Idempotency-Key", "job-1")
		b := e.create(simpleBody, "Idempotency-Key", "job-1")
		require.NotEqual(t, a.ID, b.ID)
		st := e.sim.Stats()
		require.Equal(t, 2, st.Creates)
		require.Equal(t, 1, st.DuplicateCreates)
		require.Equal(t, 2, st.MaxCreatesPerKey)
		require.Equal(t, 2, st.Predictions)
	})
	t.Run("concurrent creates with one key", func(t *testing.T) {
		t.Parallel()
		e := setup(t, sim.Config{})
		const n = 20
		ids := make(chan string, n)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				resp, b := e.do(http.MethodPost, "/v1/predictions", simpleBody, "Idempotency-Key", "k")
				if resp.StatusCode == http.StatusCreated {
					ids <- decode[wirePred](t, b).ID
				}
			})
		}
		wg.Wait()
		close(ids)
		first := <-ids
		for id := range ids {
			require.Equal(t, first, id)
		}
		st := e.sim.Stats()
		require.Equal(t, n, st.Creates)
		require.Equal(t, n-1, st.DuplicateCreates)
		require.Equal(t, n, st.MaxCreatesPerKey)
		require.Equal(t, 1, st.Predictions)
	})
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	e := setup(t, sim.Config{})
	big := `{"version":"v","input":{"x":"` + strings.Repeat("a", sim.MaxBodyBytes) + `"}}`
	tests := []struct {
		name, path, body string
		hdr              []string
		code             int
		detail           string
	}{
		{"too large", "/v1/predictions", big, nil, http.StatusRequestEntityTooLarge, "exceeds"},
		{"not JSON", "/v1/predictions", `{"version":`, nil, http.StatusBadRequest, "not valid JSON"},
		{"trailing garbage", "/v1/predictions", `{"version":"v","input":{}} x`, nil, http.StatusBadRequest, "not valid JSON"},
		{"no version", "/v1/predictions", `{"input":{}}`, nil, http.StatusUnprocessableEntity, "version"},
		{"version not a string", "/v1/predictions", `{"version":1,"input":{}}`, nil, http.StatusUnprocessableEntity, "version"},
		{"no input", "/v1/predictions", `{"version":"v"}`, nil, http.StatusUnprocessableEntity, "input"},
		{"input null", "/v1/predictions", `{"version":"v","input":null}`, nil, http.StatusUnprocessableEntity, "input"},
		{"input array", "/v1/models/a/b/predictions", `{"input":[1]}`, nil, http.StatusUnprocessableEntity, "input"},
		{"input string", "/v1/models/a/b/predictions", `{"input":"x"}`, nil, http.StatusUnprocessableEntity, "input"},
		{"bad webhook", "/v1/predictions", `{"version":"v","input":{},"webhook":"ftp://x"}`, nil, http.StatusUnprocessableEntity, "webhook"},
		{"bad filter", "/v1/predictions", `{"version":"v","input":{},"webhook":"http://x","webhook_events_filter":["done"]}`, nil, http.StatusUnprocessableEntity, "webhook_events_filter"},
		{"bad Cancel-After", "/v1/predictions", `{"version":"v","input":{}}`, []string{"Cancel-After", "soon"}, http.StatusUnprocessableEntity, "Cancel-After"},
		{"negative Cancel-After", "/v1/predictions", `{"version":"v","input":{}}`, []string{"Cancel-After", "-5s"}, http.StatusUnprocessableEntity, "Cancel-After"},
	}
	for _, tt := range tests {
		resp, b := e.do(http.MethodPost, tt.path, tt.body, tt.hdr...)
		require.Equal(t, tt.code, resp.StatusCode, "%s: %s", tt.name, b)
		pr := decode[map[string]any](t, b)
		require.Contains(t, pr["detail"], tt.detail, tt.name)
		require.EqualValues(t, tt.code, pr["status"], tt.name)
		require.NotEmpty(t, pr["title"], tt.name)
	}
	st := e.sim.Stats()
	require.Equal(t, 0, st.Creates)
	require.Equal(t, len(tests), st.BadRequests)
	require.Equal(t, 0, st.Predictions)

	// Unknown ids are 404 with Replicate's body, and counted.
	resp, b := e.do(http.MethodGet, "/v1/predictions/nope", "")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.JSONEq(t, `{"detail":"Not found."}`, string(b))
	resp, _ = e.do(http.MethodPost, "/v1/predictions/nope/cancel", "")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, 2, e.sim.Stats().NotFound)

	// Wrong methods are refused by the router.
	resp, _ = e.do(http.MethodDelete, "/v1/predictions/nope", "")
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

func TestAuthAndSecret(t *testing.T) {
	t.Parallel()
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	e := setup(t, sim.Config{Token: "r8_test", WebhookSecret: secret})

	resp, b := e.do(http.MethodPost, "/v1/predictions", simpleBody)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, string(b), "authentication token")
	resp, _ = e.do(http.MethodGet, "/v1/predictions/x", "", "Authorization", "Bearer wrong")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = e.do(http.MethodGet, "/v1/webhooks/default/secret", "", "Authorization", "Token r8_test")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	resp, b = e.do(http.MethodGet, "/v1/webhooks/default/secret", "", "Authorization", "Bearer r8_test")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, fmt.Sprintf(`{"key":%q}`, secret), string(b))
	require.Equal(t, secret, e.sim.WebhookSecret())

	resp, _ = e.do(http.MethodPost, "/v1/predictions", simpleBody, "Authorization", "Bearer r8_test")
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	// The sim's own endpoints need no token.
	resp, b = e.do(http.MethodGet, "/_sim/stats", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	st := decode[sim.Stats](t, b)
	require.Equal(t, 3, st.Unauthorized)
	require.Equal(t, 1, st.Creates)
	require.Equal(t, 0, st.StatusCalls, "401s are not status calls")

	// A generated secret is well formed.
	g, err := sim.New(sim.Config{})
	require.NoError(t, err)
	require.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=$`, g.WebhookSecret())
}

func TestSimEndpoints(t *testing.T) {
	t.Parallel()
	clk := newClock()
	e := setup(t, sim.Config{Default: exact(time.Second, time.Second), Now: clk.Now, Seed: 7})
	p := e.create(simpleBody, "Idempotency-Key", "k1", "Cancel-After", "1h")
	e.mustGet(p.ID)
	e.mustGet(p.ID)
	clk.Advance(5 * time.Second)

	resp, b := e.do(http.MethodGet, "/_sim/predictions", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	preds := decode[[]map[string]any](t, b)
	require.Len(t, preds, 1)
	require.Equal(t, p.ID, preds[0]["id"])
	require.Equal(t, "k1", preds[0]["idempotency_key"])
	require.Equal(t, sim.StatusSucceeded, preds[0]["status"])
	require.EqualValues(t, 2, preds[0]["status_calls"])
	require.Equal(t, false, preds[0]["lost"])
	require.Equal(t, false, preds[0]["never_finish"])
	require.Equal(t, false, preds[0]["webhook_sent"])
	require.Equal(t, epoch.Add(time.Second).Format(time.RFC3339Nano), preds[0]["started_at"])
	require.Equal(t, epoch.Add(2*time.Second).Format(time.RFC3339Nano), preds[0]["completed_at"])
	require.Equal(t, epoch.Add(time.Hour).Format(time.RFC3339Nano), preds[0]["deadline"])

	resp, b = e.do(http.MethodGet, "/_sim/stats", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	st := decode[map[string]any](t, b)
	for _, k := range []string{"creates", "duplicate_creates", "max_creates_per_key", "idempotency_keys",
		"status_calls", "cancel_calls", "peak_concurrent_status", "peak_concurrent_creates",
		"calls_before_retry_after", "rate_limited", "server_errors", "not_found", "webhooks_sent",
		"webhook_attempts", "webhooks_failed", "webhooks_duplicated", "webhooks_missing",
		"predictions_by_status", "lost", "peak_running", "running", "running_refused", "rate_refused"} {
		require.Contains(t, st, k)
	}
	require.EqualValues(t, 7, st["seed"])
	require.EqualValues(t, 2, st["status_calls"])
	require.Equal(t, map[string]any{"succeeded": 1.0}, st["predictions_by_status"])

	resp, _ = e.do(http.MethodPost, "/_sim/reset-stats", "")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	after := e.sim.Stats()
	require.Zero(t, after.StatusCalls)
	require.Zero(t, after.Creates)
	require.Zero(t, after.IdempotencyKeys)
	require.Equal(t, 1, after.Predictions)
	require.Zero(t, e.truth(p.ID).StatusCalls)
	// Keys survive a reset: the same key still returns the prediction.
	again := e.create(simpleBody, "Idempotency-Key", "k1")
	require.Equal(t, p.ID, again.ID)
	require.Equal(t, 1, e.sim.Stats().DuplicateCreates)
}

func TestDeterministicSeed(t *testing.T) {
	t.Parallel()
	model := sim.Model{QueueMedian: dur(10 * time.Second), QueueSigma: 0.7, RunMedian: dur(time.Minute),
		RunSigma: 0.5, FailRate: 0.3, NeverFinish: 0.2}
	fates := func(seed int64) []string {
		clk := newClock()
		e := setup(t, sim.Config{Default: model, Seed: seed, Now: clk.Now, Faults: sim.Faults{LostRate: 0.2}})
		for range 20 {
			e.create(simpleBody)
		}
		clk.Advance(24 * time.Hour)
		var out []string
		for _, p := range e.sim.Predictions() {
			out = append(out, fmt.Sprintf("%s %v %v %v", p.Status, p.StartedAt, p.CompletedAt, p.Lost))
		}
		return out
	}
	a, b, c := fates(1), fates(1), fates(2)
	require.Equal(t, a, b)
	require.NotEqual(t, a, c)
}
