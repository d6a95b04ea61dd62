package fal_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/fal"
	"github.com/pollux-dev/pollux/pkg/provider/providertest"
	"github.com/pollux-dev/pollux/pkg/state"
)

const (
	testToken = "fal_key_id:fal_key_secret"
	requestID = "80e732af-660e-45cd-bd63-580e4f2a94cc"
	model     = "fal-ai/kling-video/v2.1/master/text-to-video"
	reqPath   = "/fal-ai/kling-video/requests/" + requestID
)

// newFake is a TLS fake standing in for queue.fal.run, answering every
// request with what reply returns.
func newFake(t *testing.T, reply func(r *http.Request) (int, http.Header, []byte)) *providertest.Server {
	t.Helper()
	f := providertest.NewTLSServer(t, nil)
	f.HandleFunc("*", func(r *http.Request) providertest.Reply {
		status, h, b := reply(r)
		return providertest.Reply{Status: status, Header: h, Body: b}
	})
	return f
}

// fixture reads a sample with queue.fal.run pointed at base.
func fixture(t testing.TB, base, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return []byte(strings.ReplaceAll(string(b), "https://queue.fal.run", base))
}

func newAdapter(t *testing.T, f *providertest.Server, opts string) *fal.Adapter {
	t.Helper()
	cfg := provider.Config{Route: "f", Kind: fal.Kind, BaseURL: f.URL, Token: testToken, HTTPClient: f.Client()}
	if opts != "" {
		cfg.Options = json.RawMessage(opts)
	}
	a, err := fal.NewAdapter(cfg)
	require.NoError(t, err)
	return a
}

// route answers by method and path from a table, each answer made with
// the fake's own URL as queue.fal.run's; anything else is a 500.
func route(t *testing.T, table map[string]func(base string) (int, http.Header, []byte)) *providertest.Server {
	f := providertest.NewTLSServer(t, nil)
	for key, h := range table {
		f.HandleFunc(key, func(*http.Request) providertest.Reply {
			status, hdr, b := h(f.URL)
			return providertest.Reply{Status: status, Header: hdr, Body: b}
		})
	}
	return f
}

func serve(t *testing.T, status int, name string) func(string) (int, http.Header, []byte) {
	return func(base string) (int, http.Header, []byte) { return status, nil, fixture(t, base, name) }
}

func TestSubmit(t *testing.T) {
	t.Parallel()
	f := route(t, map[string]func(string) (int, http.Header, []byte){
		"POST /" + model: serve(t, 200, "submit.json"),
	})
	a := newAdapter(t, f, "")
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	a.SetNow(func() time.Time { return now })

	st, err := a.Submit(context.Background(), provider.SubmitRequest{
		JobID: "job-1", Model: model, Input: json.RawMessage(`{"prompt":"a red kite over the sea"}`),
		Deadline: now.Add(90*time.Second + 300*time.Millisecond), WebhookURL: "https://hooks.example/webhooks/f?job=job-1",
	})
	require.NoError(t, err)
	require.Equal(t, requestID, st.RemoteID)
	require.Equal(t, state.Queued, st.State)
	require.Equal(t, "IN_QUEUE", st.Raw)
	require.NotNil(t, st.QueuePosition)
	require.Equal(t, 1, *st.QueuePosition, "queue_position 0 (none ahead) is position 1")

	var urls map[string]string
	require.NoError(t, json.Unmarshal(st.RefData, &urls))
	require.Equal(t, map[string]string{
		"status_url": f.URL + reqPath + "/status", "response_url": f.URL + reqPath, "cancel_url": f.URL + reqPath + "/cancel",
	}, urls)
	require.LessOrEqual(t, len(st.RefData), provider.MaxRefData)

	req := f.Last()
	require.Equal(t, http.MethodPost, req.Method)
	require.Equal(t, "/"+model, req.Path, "submit keeps the subpath")
	require.Equal(t, "fal_webhook=https%3A%2F%2Fhooks.example%2Fwebhooks%2Ff%3Fjob%3Djob-1", req.RawQuery)
	require.Equal(t, "Key "+testToken, req.Header.Get("Authorization"))
	require.Equal(t, "91", req.Header.Get("X-Fal-Request-Timeout"), "rounded up")
	require.JSONEq(t, `{"prompt":"a red kite over the sea"}`, string(req.Body), "the input is the body")
}

func TestSubmitWithoutDeadlineOrWebhook(t *testing.T) {
	t.Parallel()
	f := route(t, map[string]func(string) (int, http.Header, []byte){
		"POST /fal-ai/veo3": serve(t, 200, "submit.json"),
	})
	a := newAdapter(t, f, "")
	_, err := a.Submit(context.Background(), provider.SubmitRequest{Model: "fal-ai/veo3"})
	require.NoError(t, err)
	req := f.Last()
	require.Empty(t, req.RawQuery)
	require.Empty(t, req.Header.Get("X-Fal-Request-Timeout"))
	require.JSONEq(t, `{}`, string(req.Body), "no input is an empty object")
}

func TestSubmitDeadlineFloor(t *testing.T) {
	t.Parallel()
	f := route(t, map[string]func(string) (int, http.Header, []byte){
		"POST /fal-ai/veo3": serve(t, 200, "submit.json"),
	})
	a := newAdapter(t, f, "")
	now := time.Now()
	a.SetNow(func() time.Time { return now })
	_, err := a.Submit(context.Background(), provider.SubmitRequest{Model: "fal-ai/veo3", Deadline: now.Add(200 * time.Millisecond)})
	require.NoError(t, err)
	require.Equal(t, "2", f.Last().Header.Get("X-Fal-Request-Timeout"), "fal refuses 1 s or less")
}

func TestSubmitRefusesBadModelOrInputWithoutACall(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(*http.Request) (int, http.Header, []byte) { return 500, nil, nil })
	a := newAdapter(t, f, "")
	for _, m := range []string{"", "no-slash", "../../etc", "fal-ai/../x", "fal-ai/app?x=1", "fal-ai/app#f", "https://evil.example/a", "a//b", "fal-ai/app/ sub"} {
		_, err := a.Submit(context.Background(), provider.SubmitRequest{Model: m, Input: json.RawMessage(`{}`)})
		require.Equal(t, provider.Invalid, provider.ClassOf(err), m)
	}
	for _, in := range []string{`[]`, `"x"`, `null`, `{`} {
		_, err := a.Submit(context.Background(), provider.SubmitRequest{Model: "fal-ai/veo3", Input: json.RawMessage(in)})
		require.Equal(t, provider.Invalid, provider.ClassOf(err), in)
	}
	require.Empty(t, f.Requests())
}

func TestSubmitKeepsNoURLsOffTheQueueHost(t *testing.T) {
	t.Parallel()
	f := route(t, map[string]func(string) (int, http.Header, []byte){
		"POST /fal-ai/veo3": func(string) (int, http.Header, []byte) {
			// The documented host, not the configured (fake) one.
			b, err := os.ReadFile("testdata/submit.json")
			require.NoError(t, err)
			return 200, nil, b
		},
	})
	st, err := newAdapter(t, f, "").Submit(context.Background(), provider.SubmitRequest{Model: "fal-ai/veo3"})
	require.NoError(t, err)
	require.Equal(t, requestID, st.RemoteID)
	require.Nil(t, st.RefData, "URLs on another host are never kept")
}

func TestStatusUsesStoredURLsElseThePattern(t *testing.T) {
	t.Parallel()
	f := route(t, map[string]func(string) (int, http.Header, []byte){
		"GET /stored/requests/" + requestID + "/status": serve(t, 202, "status_in_progress.json"),
		"GET " + reqPath + "/status":                    serve(t, 202, "status_in_queue.json"),
	})
	a := newAdapter(t, f, "")
	data, err := json.Marshal(map[string]string{
		"status_url":   f.URL + "/stored/requests/" + requestID + "/status",
		"response_url": f.URL + "/stored/requests/" + requestID,
		"cancel_url":   f.URL + "/stored/requests/" + requestID + "/cancel",
	})
	require.NoError(t, err)
	st, err := a.Status(context.Background(), provider.Ref{ID: requestID, Model: model, Data: data})
	require.NoError(t, err)
	require.Equal(t, state.Running, st.State, "the stored status_url is used")

	st, err = a.Status(context.Background(), provider.Ref{ID: requestID, Model: model})
	require.NoError(t, err)
	require.Equal(t, state.Queued, st.State, "a tracked job goes by owner/app, without the subpath")
}

func TestStoredURLsOffTheQueueHostAreNeverCalled(t *testing.T) {
	t.Parallel()
	f := route(t, map[string]func(string) (int, http.Header, []byte){
		"GET " + reqPath + "/status": serve(t, 202, "status_in_queue.json"),
	})
	a := newAdapter(t, f, "")
	host := strings.TrimPrefix(f.URL, "https://")
	good := f.URL + reqPath + "/status"
	bad := []string{
		"https://evil.example" + reqPath + "/status",
		"http://" + host + reqPath + "/status",
		"https://" + host + "1" + reqPath + "/status",
		"https://user:pw@" + host + reqPath + "/status",
		good + "?x=1",
		good + "#frag",
		f.URL + "/fal-ai/kling-video/requests/other-id/status",
		f.URL + "/fal-ai/kling-video/requests/" + requestID + "x/status",
		f.URL + "/fal-ai/kling-video/requests/" + requestID + "/../../../admin",
		f.URL + "/fal-ai/kling-video/requests/%2e%2e/" + requestID,
		"//" + host + reqPath,
		"",
	}
	require.True(t, a.OnQueue(good, requestID))
	for _, u := range bad {
		require.False(t, a.OnQueue(u, requestID), u)
		data, err := json.Marshal(map[string]string{"status_url": u, "response_url": u, "cancel_url": u})
		require.NoError(t, err)
		_, err = a.Status(context.Background(), provider.Ref{ID: requestID, Model: model, Data: data})
		require.NoError(t, err, u)
		require.Equal(t, reqPath+"/status", f.Last().Path, "fell back to the pattern for %s", u)
	}
}

func TestStatusRefusesABadModelWithoutACall(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(*http.Request) (int, http.Header, []byte) { return 200, nil, []byte(`{}`) })
	_, err := newAdapter(t, f, "").Status(context.Background(), provider.Ref{ID: requestID, Model: "nope"})
	require.Equal(t, provider.Invalid, provider.ClassOf(err))
	require.Empty(t, f.Requests())
}

func TestResultErrorsAreNotFinal(t *testing.T) {
	t.Parallel()
	for status, class := range map[int]provider.Class{500: provider.Transient, 404: provider.NotFound, 429: provider.RateLimited, 401: provider.Auth} {
		f := route(t, map[string]func(string) (int, http.Header, []byte){
			"GET " + reqPath + "/status": serve(t, 200, "status_completed.json"),
			"GET " + reqPath:             func(string) (int, http.Header, []byte) { return status, nil, nil },
		})
		_, err := newAdapter(t, f, "").Status(context.Background(), provider.Ref{ID: requestID, Model: model})
		require.Equal(t, class, provider.ClassOf(err), "HTTP %d on the result", status)
	}
}

func TestInfo(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(*http.Request) (int, http.Header, []byte) { return 500, nil, nil })
	info := newAdapter(t, f, "").Info()
	require.Equal(t, provider.Info{Kind: fal.Kind, Cancel: true}, info, "no webhooks without a user id; no idempotency key")
	info = newAdapter(t, f, `{"user_id":"user-123"}`).Info()
	require.True(t, info.Webhooks)
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := fal.New(provider.Config{Route: "f"})
	require.ErrorContains(t, err, "token")
	_, err = fal.New(provider.Config{Route: "f", Token: "t", WebhookSecret: "whsec_x"})
	require.ErrorContains(t, err, "webhook secret")
	_, err = fal.New(provider.Config{Route: "f", Token: "t", Options: json.RawMessage(`{"bogus":1}`)})
	require.ErrorContains(t, err, "bogus")
	_, err = fal.New(provider.Config{Route: "f", Token: "t", BaseURL: "http://queue.fal.run"})
	require.ErrorContains(t, err, "base_url")
	_, err = fal.New(provider.Config{Route: "f", Token: "t", Options: json.RawMessage(`{"jwks_url":"https://x.example/jwks"}`)})
	require.ErrorContains(t, err, "jwks_url")
	_, err = fal.New(provider.Config{Route: "f", Token: "t", Options: json.RawMessage(`{"user_id":"u","jwks_url":"http://x.example/jwks"}`)})
	require.ErrorContains(t, err, "JWKSURL")
	a, err := fal.New(provider.Config{Route: "f", Token: "t"})
	require.NoError(t, err)
	require.Equal(t, fal.Kind, a.Info().Kind)
}

func FuzzParseStatus(f *testing.F) {
	for _, name := range []string{"status_in_queue.json", "status_in_progress.json", "status_completed.json",
		"status_completed_error.json", "status_completed_timeout.json", "submit.json"} {
		f.Add(fixture(f, "https://queue.fal.run", name))
	}
	f.Add([]byte(`{"status":"IN_QUEUE","queue_position":-5}`))
	f.Add([]byte(`{"status":"COMPLETED","error":{"nested":true}}`))
	terminal := map[string]bool{"COMPLETED": true, "FAILED": true, "CANCELED": true, "CANCELLED": true}
	f.Fuzz(func(t *testing.T, body []byte) {
		st, err := fal.ParseStatus(requestID, body)
		if err != nil {
			return
		}
		if st.State.Terminal() {
			require.True(t, terminal[st.Raw], "terminal only from a known terminal value, got %q", st.Raw)
		}
		if st.QueuePosition != nil {
			require.Positive(t, *st.QueuePosition)
		}
	})
}

func FuzzOnQueue(f *testing.F) {
	f.Add("https://queue.example" + reqPath + "/status")
	f.Add("https://queue.example:443" + reqPath)
	f.Add("https://evil.example" + reqPath)
	f.Add("https://queue.example/" + reqPath + "/../x")
	f.Add("HTTPS://queue.example" + reqPath)
	f.Add("https://queue.example%2f@evil.example" + reqPath)
	a, err := fal.NewAdapter(provider.Config{Route: "f", Token: "t", BaseURL: "https://queue.example"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !a.OnQueue(raw, requestID) {
			return
		}
		u, err := url.Parse(raw)
		require.NoError(t, err)
		require.Equal(t, "https", u.Scheme, "accepted %q", raw)
		require.Equal(t, "queue.example", u.Host, "accepted %q", raw)
		require.Nil(t, u.User)
		require.Contains(t, u.Path, "/requests/"+requestID)
		require.NotContains(t, u.Path+"/", "/../")
	})
}

func TestCancelErrors(t *testing.T) {
	t.Parallel()
	f := route(t, map[string]func(string) (int, http.Header, []byte){
		"PUT " + reqPath + "/cancel": serve(t, 404, "cancel_not_found.json"),
	})
	_, err := newAdapter(t, f, "").Cancel(context.Background(), provider.Ref{ID: requestID, Model: model})
	require.Equal(t, provider.NotFound, provider.ClassOf(err), "NOT_FOUND reconciles")
	f = newFake(t, func(*http.Request) (int, http.Header, []byte) { return 500, nil, nil })
	_, err = newAdapter(t, f, "").Cancel(context.Background(), provider.Ref{ID: requestID, Model: model})
	require.Equal(t, provider.Transient, provider.ClassOf(err))
}

func TestConformance(t *testing.T) {
	t.Parallel()
	videoURL := "https://v3.fal.media/files/kangaroo/9Y2n4tYh2yLm1K0eSMQpA_output.mp4"
	status, result, cancel := "GET "+reqPath+"/status", "GET "+reqPath, "PUT "+reqPath+"/cancel"
	// The samples as documented: their URLs on queue.fal.run, never
	// called, so the adapter goes by the pattern.
	sample := func(code int, name string) providertest.Reply {
		return providertest.Reply{Status: code, Body: fixture(t, "https://queue.fal.run", name)}
	}
	timedOut := sample(504, "request_timeout.json")
	userTimeout := timedOut
	userTimeout.Header = http.Header{"X-Fal-Request-Timeout-Type": {"user"}}
	providertest.Run(t, providertest.Harness{
		New:         func(t *testing.T, srv *providertest.Server) provider.Adapter { return newAdapter(t, srv, "") },
		TLS:         true,
		Token:       testToken,
		Submit:      provider.SubmitRequest{JobID: "job-1", Model: model, Input: json.RawMessage(`{"prompt":"a kite"}`)},
		SubmitKey:   "POST /" + model,
		SubmitReply: sample(200, "submit.json"),
		SubmittedID: requestID,
		Ref:         provider.Ref{ID: requestID, Model: model},
		StatusKey:   status,
		States: []providertest.StateCase{
			{Name: "IN_QUEUE (202)", Reply: sample(202, "status_in_queue.json"), State: state.Queued, Calls: []string{status},
				Check: func(t *testing.T, st provider.Status) {
					require.Equal(t, "IN_QUEUE", st.Raw)
					require.NotNil(t, st.QueuePosition)
					require.Equal(t, 4, *st.QueuePosition, "three ahead: fourth in line")
				}},
			{Name: "IN_PROGRESS (202)", Reply: sample(202, "status_in_progress.json"), State: state.Running, Calls: []string{status},
				Check: func(t *testing.T, st provider.Status) { require.Nil(t, st.QueuePosition) }},
			{Name: "COMPLETED (200) is confirmed by the result", Reply: sample(200, "status_completed.json"),
				More: map[string]providertest.Reply{result: sample(200, "result.json")}, State: state.Succeeded, Calls: []string{status, result},
				Check: func(t *testing.T, st provider.Status) {
					require.Equal(t, "COMPLETED", st.Raw)
					require.Equal(t, []string{videoURL}, st.Outputs)
					require.True(t, st.OutputsExpireAt.IsZero(), "fal documents no retention")
				}},
			{Name: "COMPLETED with error is failed", Reply: sample(200, "status_completed_error.json"), State: state.Failed, Calls: []string{status},
				Check: func(t *testing.T, st provider.Status) {
					require.Equal(t, "Runner disconnected (runner_disconnected)", st.Reason)
				}},
			{Name: "COMPLETED whose result is a validation error is failed", Reply: sample(200, "status_completed.json"),
				More: map[string]providertest.Reply{result: sample(422, "result_validation_error.json")}, State: state.Failed, Calls: []string{status, result},
				Check: func(t *testing.T, st provider.Status) { require.Equal(t, "body.prompt: field required", st.Reason) }},
			{Name: "start deadline passed is expired", Reply: sample(200, "status_completed_timeout.json"),
				More: map[string]providertest.Reply{result: userTimeout}, State: state.Expired, Calls: []string{status, result},
				Check: func(t *testing.T, st provider.Status) { require.Contains(t, st.Reason, "X-Fal-Request-Timeout") }},
			{Name: "another timeout is failed", Reply: sample(200, "status_completed_timeout.json"),
				More: map[string]providertest.Reply{result: timedOut}, State: state.Failed, Calls: []string{status, result},
				Check: func(t *testing.T, st provider.Status) {
					require.Equal(t, "Request timed out (request_timeout)", st.Reason)
				}},
			{Name: "FAILED [unconfirmed]", Reply: providertest.OK([]byte(`{"status":"FAILED","error":"boom"}`)), State: state.Failed},
			{Name: "CANCELED [unconfirmed]", Reply: providertest.OK([]byte(`{"status":"CANCELED"}`)), State: state.Canceled},
			{Name: "unmapped is unknown", Reply: providertest.OK([]byte(`{"status":"PONDERING"}`)), State: state.Unknown,
				Check: func(t *testing.T, st provider.Status) { require.Equal(t, "PONDERING", st.Raw) }},
		},
		NotFound: providertest.Reply{Status: 404, Body: []byte(`{"detail":"Request not found"}`)},
		Errors: []providertest.ErrorCase{
			{Name: "429 sample", Reply: providertest.Reply{Status: 429, Header: http.Header{"Retry-After": {"7"}}, Body: []byte(`{"detail":"Too many requests"}`)}, Class: provider.RateLimited, RetryAfter: 7 * time.Second, Message: "Too many requests"},
			{Name: "401 sample", Reply: sample(401, "unauthorized.json"), Class: provider.Auth, Message: "Unauthorized"},
			{Name: "422 on status", Reply: sample(422, "result_validation_error.json"), Class: provider.Invalid, Message: "body.prompt: field required"},
			{Name: "503 with Retry-After", Reply: providertest.Reply{Status: 503, Header: http.Header{"Retry-After": {"3"}}}, Class: provider.RateLimited, RetryAfter: 3 * time.Second},
			{Name: "redirect is not followed", Reply: providertest.Reply{Status: 302, Header: http.Header{"Location": {"https://evil.example/x"}}}, Class: provider.Transient},
		},
		BadIDs: []string{"a/b"},
		Cancels: []providertest.CancelCase{
			{Name: "OK: removed from the queue", Replies: map[string]providertest.Reply{cancel: sample(200, "cancel_ok.json")}, State: state.Canceled, Calls: []string{cancel}},
			{Name: "CANCELLATION_REQUESTED is not final", Replies: map[string]providertest.Reply{cancel: sample(202, "cancel_requested.json")}, State: state.Unknown, Calls: []string{cancel}},
			{Name: "ALREADY_COMPLETED answers the status", Replies: map[string]providertest.Reply{
				cancel: sample(400, "cancel_already_completed.json"), status: sample(200, "status_completed.json"), result: sample(200, "result.json"),
			}, State: state.Succeeded, Calls: []string{cancel, status, result}},
		},
		PollAfter: true,
	})
}
