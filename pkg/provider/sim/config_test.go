package sim_test

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

func TestNewValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		field string
		cfg   sim.Config
	}{
		{"default.queue_median", sim.Config{Default: sim.Model{QueueMedian: -1}}},
		{"default.run_median", sim.Config{Default: sim.Model{RunMedian: dur(-time.Second)}}},
		{"default.queue_sigma", sim.Config{Default: sim.Model{QueueSigma: -0.1}}},
		{"default.run_sigma", sim.Config{Default: sim.Model{RunSigma: math.NaN()}}},
		{"default.fail_rate", sim.Config{Default: sim.Model{FailRate: 1.5}}},
		{"default.never_finish", sim.Config{Default: sim.Model{NeverFinish: -0.5}}},
		{"default.fail_rate + default.never_finish", sim.Config{Default: sim.Model{FailRate: 0.6, NeverFinish: 0.6}}},
		{`models["a/b"].run_sigma`, sim.Config{Models: map[string]sim.Model{"a/b": {RunSigma: math.Inf(1)}}}},
		{"models: empty model name", sim.Config{Models: map[string]sim.Model{"": {}}}},
		{"time_scale", sim.Config{TimeScale: -2}},
		{"time_scale", sim.Config{TimeScale: math.Inf(1)}},
		{"faults.rate_limit_rate", sim.Config{Faults: sim.Faults{RateLimitRate: 2}}},
		{"faults.server_error_rate", sim.Config{Faults: sim.Faults{ServerErrorRate: math.NaN()}}},
		{"faults.lost_rate", sim.Config{Faults: sim.Faults{LostRate: -1}}},
		{"faults.webhook_missing_rate", sim.Config{Faults: sim.Faults{WebhookMissingRate: 1.01}}},
		{"faults.webhook_duplicate_rate", sim.Config{Faults: sim.Faults{WebhookDuplicateRate: 3}}},
		{"faults.webhook_late_rate", sim.Config{Faults: sim.Faults{WebhookLateRate: -0.1}}},
		{"faults.retry_after", sim.Config{Faults: sim.Faults{RetryAfter: -1}}},
		{"faults.retry_after_grace", sim.Config{Faults: sim.Faults{RetryAfterGrace: -1}}},
		{"faults.webhook_late_by", sim.Config{Faults: sim.Faults{WebhookLateBy: -1}}},
		{"latency", sim.Config{Latency: -1}},
		{"webhook_secret", sim.Config{WebhookSecret: "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
		{"webhook_secret", sim.Config{WebhookSecret: "whsec_not base64!"}},
		{"webhook_secret", sim.Config{WebhookSecret: "whsec_c2hvcnQ="}}, // 5 bytes
		{"base_url", sim.Config{BaseURL: "localhost:8080"}},
	}
	for _, tt := range tests {
		_, err := sim.New(tt.cfg)
		require.Error(t, err, tt.field)
		require.Contains(t, err.Error(), tt.field)
	}

	_, err := sim.New(sim.Config{})
	require.NoError(t, err, "the zero config is valid")
	_, err = sim.New(sim.Config{Default: sim.Model{FailRate: 0.5, NeverFinish: 0.5}, TimeScale: 0.5,
		WebhookSecret: "whsec_RdvaYFYUXuIFuEbvZHwMfYFhUf7aMYjYcmM24+Aj40c=", BaseURL: "http://sim.test/"})
	require.NoError(t, err)
}

func TestBaseURL(t *testing.T) {
	t.Parallel()
	s, err := sim.New(sim.Config{BaseURL: "https://sim.example/"})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/predictions", strings.NewReader(simpleBody)))
	require.Equal(t, http.StatusCreated, rec.Code)
	p := decode[wirePred](t, rec.Body.Bytes())
	require.Equal(t, "https://sim.example/v1/predictions/"+p.ID, p.URLs.Get)
}

func TestLoadConfigExample(t *testing.T) {
	t.Parallel()
	cfg, err := sim.LoadConfig("testdata/sim.yaml")
	require.NoError(t, err)
	require.Equal(t, 20.0, cfg.TimeScale)
	require.Equal(t, int64(42), cfg.Seed)
	require.Equal(t, "sim-token", cfg.Token)
	require.Equal(t, dur(20*time.Millisecond), cfg.Latency)
	require.Equal(t, dur(time.Minute), cfg.Default.RunMedian)
	require.Equal(t, 0.05, cfg.Default.FailRate)
	require.Equal(t, dur(2*time.Minute), cfg.Models["google/veo-3"].RunMedian)
	require.Equal(t, dur(90*time.Second), cfg.Models["minimax/video-01"].RunMedian, "a number is seconds")
	require.Equal(t, dur(200*time.Millisecond), cfg.Faults.RetryAfterGrace)
	require.Equal(t, dur(10*time.Second), cfg.Faults.WebhookLateBy)
	require.False(t, cfg.Faults.NotIdempotent)
	require.Equal(t, sim.Limits{Running: 10, Rate: 20}, cfg.Limits)
	s, err := sim.New(cfg)
	require.NoError(t, err)
	require.Equal(t, cfg.WebhookSecret, s.WebhookSecret())
}

func TestLoadConfigStrict(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	tests := []struct {
		name, file, content, want string
	}{
		{"unknown YAML field", "a.yaml", "time_scale: 2\ntimescale: 3\n", "timescale"},
		{"unknown nested YAML field", "b.yaml", "faults:\n  rate_limit: 0.1\n", "rate_limit"},
		{"unknown JSON field", "c.json", `{"faults":{"lost":0.1}}`, "lost"},
		{"bad duration", "d.yaml", "latency: soon\n", "soon"},
		{"bad JSON duration", "e.json", `{"latency":true}`, "duration"},
		{"invalid value", "f.yaml", "faults:\n  lost_rate: 1.5\n", "faults.lost_rate"},
		{"invalid limit", "i.yaml", "limits:\n  running: -2\n", "limits.running"},
		{"unknown limit", "j.json", `{"limits":{"concurrency":2}}`, "concurrency"},
		{"two YAML documents", "g.yaml", "seed: 1\n---\nseed: 2\n", "more than one"},
		{"trailing JSON", "h.json", `{"seed":1}{"seed":2}`, "after"},
		{"missing file", "nope.yaml", "", "no such file"},
	}
	for _, tt := range tests {
		path := filepath.Join(dir, tt.file)
		if tt.content != "" {
			path = write(tt.file, tt.content)
		}
		_, err := sim.LoadConfig(path)
		require.Error(t, err, tt.name)
		require.Contains(t, err.Error(), tt.want, tt.name)
	}

	cfg, err := sim.LoadConfig(write("ok.json", `{"time_scale":10,"latency":0.25,"default":{"run_median":"2m"},
		"faults":{"retry_after":"3s","not_idempotent":true},"limits":{"running":3,"rate":1.5}}`))
	require.NoError(t, err)
	require.Equal(t, dur(250*time.Millisecond), cfg.Latency)
	require.Equal(t, dur(2*time.Minute), cfg.Default.RunMedian)
	require.Equal(t, dur(3*time.Second), cfg.Faults.RetryAfter)
	require.True(t, cfg.Faults.NotIdempotent)
	require.Equal(t, sim.Limits{Running: 3, Rate: 1.5}, cfg.Limits)

	cfg, err = sim.LoadConfig(write("empty.yaml", ""))
	require.NoError(t, err)
	require.Zero(t, cfg.TimeScale)
}

func TestDurationEncoding(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		`"90s"`: 90 * time.Second, `"1h30m"`: 90 * time.Minute, `90`: 90 * time.Second,
		`1.5`: 1500 * time.Millisecond, `"2"`: 2 * time.Second,
	} {
		var d sim.Duration
		require.NoError(t, json.Unmarshal([]byte(in), &d), in)
		require.Equal(t, want, time.Duration(d), in)
	}
	for _, in := range []string{`"x"`, `{}`, `[1]`, `1e300`} {
		var d sim.Duration
		require.Error(t, json.Unmarshal([]byte(in), &d), in)
	}
	b, err := json.Marshal(dur(90 * time.Second))
	require.NoError(t, err)
	require.JSONEq(t, `"1m30s"`, string(b))

	var m sim.Model
	require.NoError(t, yaml.Unmarshal([]byte("queue_median: 1.5\nrun_median: 2m\n"), &m))
	require.Equal(t, dur(1500*time.Millisecond), m.QueueMedian)
	require.Equal(t, dur(2*time.Minute), m.RunMedian)
	require.Error(t, yaml.Unmarshal([]byte("queue_median: [1]\n"), &m))
	out, err := yaml.Marshal(m)
	require.NoError(t, err)
	require.Contains(t, string(out), "run_median: 2m0s")
}

// FuzzCreate sends arbitrary bodies and headers to the create route: the
// sim must never panic and must answer one of the documented codes.
func FuzzCreate(f *testing.F) {
	f.Add(simpleBody, "", "")
	f.Add(`{"version":"v","input":{"a":[1,2,{"b":null}]},"webhook":"http://x/y","webhook_events_filter":["start"]}`, "90s", "k")
	f.Add(`{"input":[]}`, "1h30m", "")
	f.Add(`{"version":null,"input":{}}`, "-1", "")
	f.Add(`nul`, "", "")
	f.Add(`{"version":"a:b:c","input":{} }`, "1e9", "")
	s, err := sim.New(sim.Config{})
	require.NoError(f, err)
	h := s.Handler()
	f.Fuzz(func(t *testing.T, body, cancelAfter, key string) {
		req := httptest.NewRequest(http.MethodPost, "/v1/predictions", strings.NewReader(body))
		if cancelAfter != "" && !strings.ContainsAny(cancelAfter, "\r\n\x00") {
			req.Header.Set("Cancel-After", cancelAfter)
		}
		if key != "" && !strings.ContainsAny(key, "\r\n\x00") {
			req.Header.Set("Idempotency-Key", key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Contains(t, []int{201, 400, 413, 422}, rec.Code, rec.Body.String())
		if rec.Code == http.StatusCreated {
			p := decode[wirePred](t, rec.Body.Bytes())
			code, _ := serveGet(h, p.ID)
			require.Equal(t, http.StatusOK, code)
		}
	})
}

func serveGet(h http.Handler, id string) (int, []byte) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/predictions/"+id, nil))
	return rec.Code, rec.Body.Bytes()
}
