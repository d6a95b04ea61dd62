package httpapi_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/httpapi"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		header http.Header
		want   time.Duration
	}{
		{http.Header{}, 0},
		{http.Header{"Retry-After": {"5"}}, 5 * time.Second},
		{http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{http.Header{"Retry-After": {"0"}}, 0},
		{http.Header{"Retry-After": {"-3"}}, 0},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{"Retry-After": {"999999"}}, httpapi.MaxRetryAfter},
		{http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, 90 * time.Second},
		{http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, 250 * time.Millisecond},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, httpapi.RetryAfter(tt.header, now), "%v", tt.header)
	}
}

// A successful answer's hint for the next poll: the OpenAI-style
// openai-poll-after-ms first, else Retry-After as RetryAfter reads it.
func TestPollAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		header http.Header
		want   time.Duration
	}{
		{http.Header{}, 0},
		{http.Header{"Openai-Poll-After-Ms": {"1500"}}, 1500 * time.Millisecond},
		{http.Header{"Openai-Poll-After-Ms": {"1500"}, "Retry-After": {"9"}}, 1500 * time.Millisecond},
		{http.Header{"Openai-Poll-After-Ms": {"never"}, "Retry-After": {"9"}}, 9 * time.Second},
		{http.Header{"Openai-Poll-After-Ms": {"-5"}}, 0},
		{http.Header{"Openai-Poll-After-Ms": {"1e12"}}, httpapi.MaxRetryAfter},
		{http.Header{"Retry-After-Ms": {"250"}}, 250 * time.Millisecond},
		{http.Header{"Retry-After": {now.Add(time.Minute).Format(http.TimeFormat)}}, time.Minute},
	} {
		require.Equal(t, tt.want, httpapi.PollAfter(tt.header, now), "%v", tt.header)
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tests := map[int]provider.Class{
		400: provider.Invalid, 401: provider.Auth, 403: provider.Auth, 404: provider.NotFound,
		408: provider.Transient, 409: provider.Transient, 410: provider.NotFound, 422: provider.Invalid,
		429: provider.RateLimited, 500: provider.Transient, 502: provider.Transient, 503: provider.Transient,
	}
	for status, class := range tests {
		require.Equal(t, class, httpapi.Classify(status, http.Header{}, nil, now).Class, "HTTP %d", status)
	}
	e := httpapi.Classify(503, http.Header{"Retry-After": {"2"}}, nil, now)
	require.Equal(t, provider.RateLimited, e.Class, "503 with Retry-After asks to back off")
	require.Equal(t, 2*time.Second, e.RetryAfter)

	for body, concurrency := range map[string]bool{
		`{"title":"Concurrency limit reached","detail":"You have reached the limit of 4 predictions running at once."}`: true,
		`{"error":{"message":"Too many concurrent tasks"}}`:                                                             true,
		`{"code":1303,"message":"parallel task over resource pack limit"}`:                                              true,
		`{"detail":"Request was throttled. Your rate limit resets in ~30s."}`:                                           false,
		`{"title":"Too Many Requests","detail":"the account is limited to 5 requests per second."}`:                     false,
	} {
		e := httpapi.Classify(429, http.Header{}, []byte(body), now)
		require.Equal(t, concurrency, e.Concurrency, body)
		require.Equal(t, concurrency, provider.ConcurrencyLimited(e), body)
	}
	require.False(t, httpapi.Classify(400, http.Header{}, []byte(`{"detail":"max 4 at once"}`), now).Concurrency, "only a rate limit")
}

func TestDetail(t *testing.T) {
	t.Parallel()
	require.Equal(t, "bad input", httpapi.Detail([]byte(`{"detail":"bad input"}`)))
	require.Equal(t, "nested", httpapi.Detail([]byte(`{"error":{"message":"nested"}}`)))
	require.Equal(t, "plain", httpapi.Detail([]byte(`{"message":"plain"}`)))
	require.Empty(t, httpapi.Detail([]byte(`<html>502</html>`)))
	require.Empty(t, httpapi.Detail([]byte(`{"detail":5}`)))
	long := make([]byte, 0, 2000)
	long = append(long, `{"detail":"`...)
	for range 1000 {
		long = append(long, 'x')
	}
	long = append(long, `"}`...)
	require.LessOrEqual(t, len(httpapi.Detail(long)), 520)
}

func TestDoKeepsConnectionsAcrossConcurrentCalls(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := httpapi.Client{BaseURL: srv.URL, HTTP: httpapi.NewHTTPClient()}
	const waves, width = 3, 64
	done := make(chan error, width)
	for range waves {
		for range width {
			go func() {
				_, err := c.Do(context.Background(), http.MethodGet, "/x", nil, nil)
				done <- err
			}()
		}
		for range width {
			require.NoError(t, <-done)
		}
	}
	// Go's default transport keeps two idle connections per host and would
	// open about width new ones per wave.
	require.LessOrEqual(t, conns.Load(), int32(width+8), "connections are reused across waves")
}

func TestExchangeReturnsEveryAnswerAndNeverFollowsRedirects(t *testing.T) {
	t.Parallel()
	var stolen atomic.Bool
	evil := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			stolen.Store(true)
		}
	}))
	defer evil.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/teapot":
			w.Header().Set("X-Why", "short and stout")
			w.WriteHeader(http.StatusTeapot)
			_, _ = w.Write([]byte(`{"detail":"I'm a teapot"}`))
		case "/moved":
			http.Redirect(w, r, evil.URL+"/steal", http.StatusFound)
		}
	}))
	defer srv.Close()
	c := httpapi.Client{BaseURL: srv.URL, HTTP: httpapi.NewHTTPClient(),
		Authorize: func(r *http.Request) { r.Header.Set("Authorization", "Bearer secret") }}

	x, err := c.Exchange(context.Background(), http.MethodGet, "/teapot", nil, nil)
	require.NoError(t, err)
	require.False(t, x.OK())
	require.Equal(t, http.StatusTeapot, x.Status)
	require.Equal(t, "short and stout", x.Header.Get("X-Why"))
	require.JSONEq(t, `{"detail":"I'm a teapot"}`, string(x.Body))
	_, err = c.Do(context.Background(), http.MethodGet, "/teapot", nil, nil)
	require.Equal(t, provider.Invalid, provider.ClassOf(err))
	require.ErrorContains(t, err, "I'm a teapot")

	x, err = c.Exchange(context.Background(), http.MethodGet, "/moved", nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusFound, x.Status, "the redirect is an answer, not followed")
	require.False(t, stolen.Load())
}
