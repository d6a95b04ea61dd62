package replicate_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/providertest"
	"github.com/pollux-dev/pollux/pkg/provider/replicate"
	"github.com/pollux-dev/pollux/pkg/signature"
	"github.com/pollux-dev/pollux/pkg/state"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return b
}

// newFake is a fake answering every request with what reply returns.
func newFake(t *testing.T, reply func(r *http.Request) (int, http.Header, []byte)) *providertest.Server {
	f := providertest.NewServer(t, nil)
	f.HandleFunc("*", func(r *http.Request) providertest.Reply {
		status, h, b := reply(r)
		return providertest.Reply{Status: status, Header: h, Body: b}
	})
	return f
}

func newAdapter(t *testing.T, base, secret string) *replicate.Adapter {
	t.Helper()
	a, err := replicate.NewAdapter(provider.Config{Route: "r", Kind: replicate.Kind, BaseURL: base, Token: "r8_test", WebhookSecret: secret})
	require.NoError(t, err)
	return a
}

func TestSubmitOnTheModelRoute(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(*http.Request) (int, http.Header, []byte) { return 201, nil, fixture(t, "starting.json") })
	a := newAdapter(t, f.URL, "")
	deadline := time.Now().Add(90 * time.Second)
	st, err := a.Submit(context.Background(), provider.SubmitRequest{
		JobID: "job-1", Model: "minimax/video-01", Input: json.RawMessage(`{"prompt":"a red kite over the sea"}`),
		IdempotencyKey: "key-1", Deadline: deadline, WebhookURL: "https://hooks.example/webhooks/r?job=job-1",
	})
	require.NoError(t, err)
	require.Equal(t, "ufawqhfynnddngldkgtslldrkq", st.RemoteID)
	require.Equal(t, state.Queued, st.State)
	require.Equal(t, "starting", st.Raw)

	req := f.Last()
	require.Equal(t, http.MethodPost, req.Method)
	require.Equal(t, "/v1/models/minimax/video-01/predictions", req.Path)
	require.Equal(t, "Bearer r8_test", req.Header.Get("Authorization"))
	require.Empty(t, req.Header.Get("Prefer"), "never hold the request open")
	require.Equal(t, "key-1", req.Header.Get("Idempotency-Key"))
	require.Regexp(t, `^(90|91)s$`, req.Header.Get("Cancel-After"), "rounded up")
	var body map[string]any
	require.NoError(t, json.Unmarshal(req.Body, &body))
	require.Equal(t, map[string]any{"prompt": "a red kite over the sea"}, body["input"])
	require.Equal(t, "https://hooks.example/webhooks/r?job=job-1", body["webhook"])
	require.Equal(t, []any{"completed"}, body["webhook_events_filter"])
	require.NotContains(t, body, "version")
}

func TestSubmitWithAVersion(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(*http.Request) (int, http.Header, []byte) { return 201, nil, fixture(t, "starting.json") })
	a := newAdapter(t, f.URL, "")
	version := strings.Repeat("ab", 32)
	for _, model := range []string{"owner/name:" + version, version} {
		_, err := a.Submit(context.Background(), provider.SubmitRequest{Model: model, Input: json.RawMessage(`{}`)})
		require.NoError(t, err)
		req := f.Last()
		require.Equal(t, "/v1/predictions", req.Path)
		var body map[string]any
		require.NoError(t, json.Unmarshal(req.Body, &body))
		require.Equal(t, version, body["version"])
		require.NotContains(t, body, "webhook", "no webhook asked for")
		require.Empty(t, req.Header.Get("Cancel-After"), "no deadline, no Cancel-After")
	}
}

func TestSubmitRefusesABadModelWithoutACall(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(*http.Request) (int, http.Header, []byte) { return 500, nil, nil })
	a := newAdapter(t, f.URL, "")
	for _, model := range []string{"", "no-slash", "../../etc/passwd", "Owner/Name", "a/b/c", "a/b?x=1"} {
		_, err := a.Submit(context.Background(), provider.SubmitRequest{Model: model, Input: json.RawMessage(`{}`)})
		require.Equal(t, provider.Invalid, provider.ClassOf(err), model)
	}
	require.Empty(t, f.Requests())
}

func TestUnknownStatusIsNeverTerminal(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(*http.Request) (int, http.Header, []byte) {
		return 200, nil, []byte(`{"id":"x1","status":"pondering"}`)
	})
	st, err := newAdapter(t, f.URL, "").Status(context.Background(), provider.Ref{ID: "x1"})
	require.NoError(t, err)
	require.Equal(t, state.Unknown, st.State)
	require.Equal(t, "pondering", st.Raw)
}

func signed(t *testing.T, secret, id string, ts time.Time, body []byte) http.Header {
	t.Helper()
	key, err := signature.ParseSecret(secret)
	require.NoError(t, err)
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", itoa(ts.Unix()))
	h.Set("webhook-signature", signature.Sign(key, id, ts, body))
	return h
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestWebhookWithConfiguredSecret(t *testing.T) {
	t.Parallel()
	a := newAdapter(t, "http://127.0.0.1:1", testSecret) // never called
	body := fixture(t, "succeeded.json")
	h := signed(t, testSecret, "msg_1", time.Now(), body)

	id, err := a.VerifyWebhook(context.Background(), h, body)
	require.NoError(t, err)
	require.Equal(t, "msg_1", id)
	st, err := a.ParseWebhook(h, body)
	require.NoError(t, err)
	require.Equal(t, state.Succeeded, st.State)
	require.Equal(t, "ufawqhfynnddngldkgtslldrkq", st.RemoteID)

	tampered := append([]byte{}, body...)
	tampered[len(tampered)-3] ^= 1
	_, err = a.VerifyWebhook(context.Background(), h, tampered)
	require.ErrorIs(t, err, provider.ErrSignature)

	stale := signed(t, testSecret, "msg_1", time.Now().Add(-10*time.Minute), body)
	_, err = a.VerifyWebhook(context.Background(), stale, body)
	require.ErrorIs(t, err, provider.ErrSignature)

	h.Del("webhook-signature")
	_, err = a.VerifyWebhook(context.Background(), h, body)
	require.ErrorIs(t, err, provider.ErrMalformed)

	_, err = a.ParseWebhook(h, []byte("not json"))
	require.ErrorIs(t, err, provider.ErrMalformed)
}

func TestWebhookSecretFetchedOnce(t *testing.T) {
	t.Parallel()
	var fetches atomic.Int32
	f := newFake(t, func(r *http.Request) (int, http.Header, []byte) {
		require.Equal(t, "/v1/webhooks/default/secret", r.URL.Path)
		require.Equal(t, "Bearer r8_test", r.Header.Get("Authorization"))
		fetches.Add(1)
		return 200, nil, []byte(`{"key":"` + testSecret + `"}`)
	})
	a := newAdapter(t, f.URL, "")
	body := fixture(t, "succeeded.json")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			_, err := a.VerifyWebhook(context.Background(), signed(t, testSecret, "msg_"+itoa(int64(i)), time.Now(), body), body)
			require.NoError(t, err)
		})
	}
	wg.Wait()
	require.Equal(t, int32(1), fetches.Load())
}

func TestWebhookSecretFetchFailureIsNotASignatureError(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(*http.Request) (int, http.Header, []byte) { return 500, nil, nil })
	a := newAdapter(t, f.URL, "")
	body := fixture(t, "succeeded.json")
	_, err := a.VerifyWebhook(context.Background(), signed(t, testSecret, "m", time.Now(), body), body)
	require.Error(t, err)
	require.False(t, errors.Is(err, provider.ErrSignature), "the sender is not at fault; the receiver answers 503")
}

// One failed fetch of the signing secret (a 5xx) refuses deliveries for
// about a second, not for long: the next delivery after that fetches again.
func TestWebhookSecretFetchRetriedSoon(t *testing.T) {
	t.Parallel()
	var fetches atomic.Int32
	f := newFake(t, func(*http.Request) (int, http.Header, []byte) {
		if fetches.Add(1) == 1 {
			return 500, nil, nil
		}
		return 200, nil, []byte(`{"key":"` + testSecret + `"}`)
	})
	a := newAdapter(t, f.URL, "")
	body := fixture(t, "succeeded.json")
	verify := func() error {
		_, err := a.VerifyWebhook(context.Background(), signed(t, testSecret, "m", time.Now(), body), body)
		return err
	}
	require.Error(t, verify(), "the fetch failed")
	require.ErrorContains(t, verify(), "fetch failed or rate limited recently", "not fetched again at once")
	require.Equal(t, int32(1), fetches.Load())
	require.Eventually(t, func() bool { return verify() == nil }, 5*time.Second, 50*time.Millisecond)
	require.Equal(t, int32(2), fetches.Load(), "fetched again once, then kept")
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := replicate.New(provider.Config{Route: "r"})
	require.ErrorContains(t, err, "token")
	_, err = replicate.New(provider.Config{Route: "r", Token: "t", WebhookSecret: "not-a-secret"})
	require.ErrorContains(t, err, "webhook secret")
	require.NotContains(t, err.Error(), "not-a-secret")
	_, err = replicate.New(provider.Config{Route: "r", Token: "t", Options: json.RawMessage(`{"webhook_events":["everything"]}`)})
	require.ErrorContains(t, err, "webhook_events")
	_, err = replicate.New(provider.Config{Route: "r", Token: "t", Options: json.RawMessage(`{"bogus":1}`)})
	require.ErrorContains(t, err, "bogus")
}

func TestProgress(t *testing.T) {
	t.Parallel()
	require.Nil(t, replicate.Progress(""))
	require.Nil(t, replicate.Progress("loading weights"))
	p := replicate.Progress(" 3%|▎  | 1/30\n 97%|█████████▋| 29/30")
	require.InDelta(t, 0.97, *p, 1e-9)
	require.Nil(t, replicate.Progress("150%|"), "nonsense percentages are ignored")
}

func FuzzParseWebhook(f *testing.F) {
	for _, name := range []string{"starting.json", "processing.json", "succeeded.json", "failed.json", "aborted.json"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	a, err := replicate.NewAdapter(provider.Config{Route: "r", Token: "t", WebhookSecret: testSecret})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		st, err := a.ParseWebhook(nil, body)
		if err != nil {
			return
		}
		require.NotEmpty(t, st.RemoteID)
		if st.Progress != nil {
			require.True(t, *st.Progress >= 0 && *st.Progress <= 1)
		}
		require.LessOrEqual(t, len(st.Outputs), 100)
	})
}

// A rate limit the account met on any call holds the signing secret's
// fetch back until its Retry-After passes: the route's pause covers the
// calls Pollux makes for jobs, not this one the adapter makes itself.
func TestWebhookSecretNotFetchedWhileRateLimited(t *testing.T) {
	t.Parallel()
	var fetches atomic.Int32
	f := newFake(t, func(r *http.Request) (int, http.Header, []byte) {
		if r.URL.Path == "/v1/webhooks/default/secret" {
			fetches.Add(1)
			return 200, nil, []byte(`{"key":"` + testSecret + `"}`)
		}
		return 429, http.Header{"Retry-After": {"60"}}, []byte(`{"detail":"Request was throttled."}`)
	})
	a := newAdapter(t, f.URL, "")
	_, err := a.Status(context.Background(), provider.Ref{ID: "p1"})
	require.Equal(t, provider.RateLimited, provider.ClassOf(err))
	body := fixture(t, "succeeded.json")
	_, err = a.VerifyWebhook(context.Background(), signed(t, testSecret, "m", time.Now(), body), body)
	require.ErrorContains(t, err, "rate limited recently")
	require.False(t, errors.Is(err, provider.ErrSignature), "answered 503: the provider retries")
	require.Zero(t, fetches.Load(), "no call while the account is throttled")
}

func TestConformance(t *testing.T) {
	t.Parallel()
	const id = "ufawqhfynnddngldkgtslldrkq"
	ok := func(name string) providertest.Reply { return providertest.OK(fixture(t, name)) }
	providertest.Run(t, providertest.Harness{
		New:         func(t *testing.T, srv *providertest.Server) provider.Adapter { return newAdapter(t, srv.URL, "") },
		Token:       "r8_test",
		Submit:      provider.SubmitRequest{JobID: "job-1", Model: "minimax/video-01", Input: json.RawMessage(`{"prompt":"a kite"}`), IdempotencyKey: "key-1"},
		SubmitKey:   "POST /v1/models/minimax/video-01/predictions",
		SubmitReply: providertest.Reply{Status: 201, Body: fixture(t, "starting.json")},
		SubmittedID: id,
		Ref:         provider.Ref{ID: id},
		StatusKey:   "GET /v1/predictions/" + id,
		States: []providertest.StateCase{
			{Name: "starting.json", Reply: ok("starting.json"), State: state.Queued, Check: func(t *testing.T, st provider.Status) {
				require.Equal(t, time.Date(2026, 11, 29, 10, 0, 0, 123456000, time.UTC), st.CreatedAt)
				require.Nil(t, st.Progress)
			}},
			{Name: "processing.json", Reply: ok("processing.json"), State: state.Running, Check: func(t *testing.T, st provider.Status) {
				require.NotNil(t, st.Progress)
				require.InDelta(t, 0.42, *st.Progress, 1e-9, "scraped from the last tqdm line")
				require.Equal(t, time.Date(2026, 11, 29, 10, 0, 3, 500000000, time.UTC), st.StartedAt)
			}},
			{Name: "succeeded.json", Reply: ok("succeeded.json"), State: state.Succeeded, Check: func(t *testing.T, st provider.Status) {
				completed := time.Date(2026, 11, 29, 10, 1, 12, 250000000, time.UTC)
				require.Equal(t, completed, st.CompletedAt)
				require.Equal(t, []string{"https://replicate.delivery/xezq/abc123/output.mp4"}, st.Outputs)
				require.Equal(t, completed.Add(time.Hour), st.OutputsExpireAt)
			}},
			{Name: "failed.json", Reply: ok("failed.json"), State: state.Failed, Check: func(t *testing.T, st provider.Status) {
				require.Contains(t, st.Reason, "flagged as sensitive")
			}},
			{Name: "canceled.json", Reply: ok("canceled.json"), State: state.Canceled},
			{Name: "aborted.json", Reply: ok("aborted.json"), State: state.Expired, Check: func(t *testing.T, st provider.Status) {
				require.Contains(t, st.Reason, "aborted")
			}},
		},
		NotFound: providertest.Reply{Status: 404, Body: fixture(t, "not_found.json")},
		Errors: []providertest.ErrorCase{
			{Name: "429 with the documented body only", Reply: providertest.Reply{Status: 429, Body: fixture(t, "throttled.json")}, Class: provider.RateLimited, RetryAfter: 30 * time.Second, Message: "resets in ~30s"},
			{Name: "429 Retry-After wins", Reply: providertest.Reply{Status: 429, Header: http.Header{"Retry-After": {"7"}}, Body: fixture(t, "throttled.json")}, Class: provider.RateLimited, RetryAfter: 7 * time.Second},
			{Name: "401 sample", Reply: providertest.Reply{Status: 401, Body: fixture(t, "unauthenticated.json")}, Class: provider.Auth, Message: "valid authentication token"},
			{Name: "422 sample", Reply: providertest.Reply{Status: 422, Body: fixture(t, "invalid_input.json")}, Class: provider.Invalid, Message: "input.prompt"},
			{Name: "503 with Retry-After", Reply: providertest.Reply{Status: 503, Header: http.Header{"Retry-After": {"3"}}}, Class: provider.RateLimited, RetryAfter: 3 * time.Second},
			{Name: "no id", Reply: providertest.OK([]byte(`{"status":"succeeded"}`)), Class: provider.Transient, Message: "without an id"},
		},
		Cancels: []providertest.CancelCase{
			{Name: "canceled", Replies: map[string]providertest.Reply{"POST /v1/predictions/" + id + "/cancel": ok("canceled.json")},
				State: state.Canceled, Calls: []string{"POST /v1/predictions/" + id + "/cancel"}},
		},
		PollAfter: true,
	})
}
