package sim_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wirePred is Replicate's prediction object as a client decodes it.
type wirePred struct {
	ID          string         `json:"id"`
	Model       string         `json:"model"`
	Version     string         `json:"version"`
	Input       map[string]any `json:"input"`
	Logs        string         `json:"logs"`
	Output      []string       `json:"output"`
	Error       *string        `json:"error"`
	Status      string         `json:"status"`
	CreatedAt   string         `json:"created_at"`
	StartedAt   *string        `json:"started_at"`
	CompletedAt *string        `json:"completed_at"`
	URLs        struct {
		Get    string `json:"get"`
		Cancel string `json:"cancel"`
		Stream string `json:"stream"`
	} `json:"urls"`
	Metrics             map[string]float64 `json:"metrics"`
	Webhook             string             `json:"webhook"`
	WebhookEventsFilter []string           `json:"webhook_events_filter"`
}

// fakeClock is a settable clock for Config.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newClock() *fakeClock { return &fakeClock{t: epoch} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is a sim behind a real HTTP server and a client for it.
type env struct {
	t   *testing.T
	sim *sim.Server
	url string
	hc  *http.Client
}

func setup(t *testing.T, cfg sim.Config) *env {
	t.Helper()
	s, err := sim.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	// Keep connections for reuse, so that bursts of calls do not churn
	// through thousands of short-lived sockets.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 100}, Timeout: 10 * time.Second}
	t.Cleanup(func() {
		srv.Close()
		hc.CloseIdleConnections()
	})
	return &env{t: t, sim: s, url: srv.URL, hc: hc}
}

// run runs the sim's Run until the test ends.
func (e *env) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.sim.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		require.NoError(e.t, <-done)
	})
}

// reply is a response whose body was read (and closed).
type reply struct {
	StatusCode int
	Header     http.Header
}

// do sends a request; hdr holds header name/value pairs.
func (e *env) do(method, path, body string, hdr ...string) (reply, []byte) {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, r)
	require.NoError(e.t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.hc.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return reply{StatusCode: resp.StatusCode, Header: resp.Header}, b
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(b, &v), "body: %s", b)
	return v
}

// create makes a prediction and requires 201.
func (e *env) create(body string, hdr ...string) wirePred {
	e.t.Helper()
	resp, b := e.do(http.MethodPost, "/v1/predictions", body, hdr...)
	require.Equal(e.t, http.StatusCreated, resp.StatusCode, "body: %s", b)
	return decode[wirePred](e.t, b)
}

// get fetches a prediction; the wirePred is zero unless the answer is 200.
func (e *env) get(id string) (int, wirePred) {
	e.t.Helper()
	resp, b := e.do(http.MethodGet, "/v1/predictions/"+id, "")
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, wirePred{}
	}
	return resp.StatusCode, decode[wirePred](e.t, b)
}

func (e *env) mustGet(id string) wirePred {
	e.t.Helper()
	code, p := e.get(id)
	require.Equal(e.t, http.StatusOK, code)
	return p
}

func (e *env) cancel(id string) (int, wirePred) {
	e.t.Helper()
	resp, b := e.do(http.MethodPost, "/v1/predictions/"+id+"/cancel", "")
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, wirePred{}
	}
	return resp.StatusCode, decode[wirePred](e.t, b)
}

// truth returns the sim's ground truth for id.
func (e *env) truth(id string) sim.Prediction {
	e.t.Helper()
	for _, p := range e.sim.Predictions() {
		if p.ID == id {
			return p
		}
	}
	e.t.Fatalf("no prediction %s", id)
	return sim.Prediction{}
}

func parseTime(t *testing.T, s *string) time.Time {
	t.Helper()
	require.NotNil(t, s)
	v, err := time.Parse(time.RFC3339Nano, *s)
	require.NoError(t, err)
	return v
}

// checkSignature verifies a Standard Webhooks v1 signature independently
// of the sim's code.
func checkSignature(t *testing.T, secret string, h http.Header, body []byte) {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	require.NoError(t, err)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(h.Get("webhook-id") + "." + h.Get("webhook-timestamp") + "."))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	require.True(t, hmac.Equal([]byte(want), []byte(h.Get("webhook-signature"))),
		"signature %q, want %q", h.Get("webhook-signature"), want)
}

const simpleBody = `{"version":"owner/model:abc123","input":{"prompt":"a cat"}}`
