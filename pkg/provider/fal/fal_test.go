package fal_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/fal"
	"github.com/pollux-dev/pollux/pkg/state"
)

const (
	testToken = "fal_key_id:fal_key_secret"
	requestID = "80e732af-660e-45cd-bd63-580e4f2a94cc"
	model     = "fal-ai/kling-video/v2.1/master/text-to-video"
	reqPath   = "/fal-ai/kling-video/requests/" + requestID
)

// fake is a TLS httptest server standing in for queue.fal.run: it answers
// with canned responses, with the documented host replaced by its own, and
// records what it saw.
type fake struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*recorded
	reply    func(r *http.Request) (status int, header http.Header, body []byte)
}

type recorded struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
}

func newFake(t *testing.T, reply func(r *http.Request) (int, http.Header, []byte)) *fake {
	t.Helper()
	f := &fake{reply: reply}
	f.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.requests = append(f.requests, &recorded{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
		f.mu.Unlock()
		status, h, b := f.reply(r)
		for k, v := range h {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		_, _ = w.Write(b)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) all() []*recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*recorded(nil), f.requests...)
}

func (f *fake) last() *recorded {
	all := f.all()
	return all[len(all)-1]
}

// fixture reads a sample with queue.fal.run pointed at base.
func fixture(t testing.TB, base, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return []byte(strings.ReplaceAll(string(b), "https://queue.fal.run", base))
}

func newAdapter(t *testing.T, f *fake, opts string) *fal.Adapter {
	t.Helper()
	cfg := provider.Config{Route: "f", Kind: fal.Kind, BaseURL: f.URL, Token: testToken, HTTPClient: f.Client()}
	if opts != "" {
		cfg.Options = json.RawMessage(opts)
	}
	a, err := fal.NewAdapter(cfg)
	require.NoError(t, err)
	return a
}

// route answers by method and path from a table; anything else is a 500.
func route(t *testing.T, table map[string]func(base string) (int, http.Header, []byte)) (*fake, func(*http.Request) (int, http.Header, []byte)) {
	var f *fake
	reply := func(r *http.Request) (int, http.Header, []byte) {
		if h, ok := table[r.Method+" "+r.URL.Path]; ok {
			return h(f.URL)
		}
		return 500, nil, []byte(`{"detail":"unexpected ` + r.Method + " " + r.URL.Path + `"}`)
	}
	f = newFake(t, reply)
	return f, reply
}

func serve(t *testing.T, status int, name string) func(string) (int, http.Header, []byte) {
	return func(base string) (int, http.Header, []byte) { return status, nil, fixture(t, base, name) }
}

func TestSubmit(t *testing.T) {
	t.Parallel()
	f, _ := route(t, map[string]func(string) (int, http.Header, []byte){
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

	req := f.last()
	require.Equal(t, http.MethodPost, req.Method)
	require.Equal(t, "/"+model, req.Path, "submit keeps the subpath")
	require.Equal(t, "fal_webhook=https%3A%2F%2Fhooks.example%2Fwebhooks%2Ff%3Fjob%3Djob-1", req.RawQuery)
	require.Equal(t, "Key "+testToken, req.Header.Get("Authorization"))
	require.Equal(t, "91", req.Header.Get("X-Fal-Request-Timeout"), "rounded up")
	require.JSONEq(t, `{"prompt":"a red kite over the sea"}`, string(req.Body), "the input is the body")
}

func TestSubmitWithoutDeadlineOrWebhook(t *testing.T) {
	t.Parallel()
	f, _ := route(t, map[string]func(string) (int, http.Header, []byte){
		"POST /fal-ai/veo3": serve(t, 200, "submit.json"),
	})
	a := newAdapter(t, f, "")
	_, err := a.Submit(context.Background(), provider.SubmitRequest{Model: "fal-ai/veo3"})
	require.NoError(t, err)
	req := f.last()
	require.Empty(t, req.RawQuery)
	require.Empty(t, req.Header.Get("X-Fal-Request-Timeout"))
	require.JSONEq(t, `{}`, string(req.Body), "no input is an empty object")
}

func TestSubmitDeadlineFloor(t *testing.T) {
	t.Parallel()
	f, _ := route(t, map[string]func(string) (int, http.Header, []byte){
		"POST /fal-ai/veo3": serve(t, 200, "submit.json"),
	})
	a := newAdapter(t, f, "")
	now := time.Now()
	a.SetNow(func() time.Time { return now })
	_, err := a.Submit(context.Background(), provider.SubmitRequest{Model: "fal-ai/veo3", Deadline: now.Add(200 * time.Millisecond)})
	require.NoError(t, err)
	require.Equal(t, "2", f.last().Header.Get("X-Fal-Request-Timeout"), "fal refuses 1 s or less")
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
	require.Empty(t, f.all())
}

func TestSubmitKeepsNoURLsOffTheQueueHost(t *testing.T) {
	t.Parallel()
	f, _ := route(t, map[string]func(string) (int, http.Header, []byte){
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

func TestStatusMapsEveryState(t *testing.T) {
	t.Parallel()
	videoURL := "https://v3.fal.media/files/kangaroo/9Y2n4tYh2yLm1K0eSMQpA_output.mp4"
	userTimeout := func(string) (int, http.Header, []byte) {
		b, err := os.ReadFile("testdata/request_timeout.json")
		require.NoError(t, err)
		return 504, http.Header{"X-Fal-Request-Timeout-Type": {"user"}}, b
	}
	otherTimeout := func(string) (int, http.Header, []byte) {
		b, err := os.ReadFile("testdata/request_timeout.json")
		require.NoError(t, err)
		return 504, nil, b
	}
	tests := []struct {
		name       string
		status     func(string) (int, http.Header, []byte)
		result     func(string) (int, http.Header, []byte) // nil: must not be fetched
		state      state.State
		raw        string
		check      func(*testing.T, provider.Status)
		wantResult bool
	}{
		{name: "IN_QUEUE (202)", status: serve(t, 202, "status_in_queue.json"), state: state.Queued, raw: "IN_QUEUE",
			check: func(t *testing.T, st provider.Status) {
				require.NotNil(t, st.QueuePosition)
				require.Equal(t, 4, *st.QueuePosition, "three ahead: fourth in line")
			}},
		{name: "IN_PROGRESS (202)", status: serve(t, 202, "status_in_progress.json"), state: state.Running, raw: "IN_PROGRESS",
			check: func(t *testing.T, st provider.Status) { require.Nil(t, st.QueuePosition) }},
		{name: "COMPLETED (200) is confirmed by the result", status: serve(t, 200, "status_completed.json"),
			result: serve(t, 200, "result.json"), state: state.Succeeded, raw: "COMPLETED", wantResult: true,
			check: func(t *testing.T, st provider.Status) {
				require.Equal(t, []string{videoURL}, st.Outputs)
				require.True(t, st.OutputsExpireAt.IsZero(), "fal documents no retention")
			}},
		{name: "COMPLETED with error is failed", status: serve(t, 200, "status_completed_error.json"),
			state: state.Failed, raw: "COMPLETED",
			check: func(t *testing.T, st provider.Status) {
				require.Equal(t, "Runner disconnected (runner_disconnected)", st.Reason)
			}},
		{name: "COMPLETED whose result is a validation error is failed", status: serve(t, 200, "status_completed.json"),
			result: serve(t, 422, "result_validation_error.json"), state: state.Failed, raw: "COMPLETED", wantResult: true,
			check: func(t *testing.T, st provider.Status) { require.Equal(t, "body.prompt: field required", st.Reason) }},
		{name: "start deadline passed is expired", status: serve(t, 200, "status_completed_timeout.json"),
			result: userTimeout, state: state.Expired, raw: "COMPLETED", wantResult: true,
			check: func(t *testing.T, st provider.Status) { require.Contains(t, st.Reason, "X-Fal-Request-Timeout") }},
		{name: "another timeout is failed", status: serve(t, 200, "status_completed_timeout.json"),
			result: otherTimeout, state: state.Failed, raw: "COMPLETED", wantResult: true,
			check: func(t *testing.T, st provider.Status) {
				require.Equal(t, "Request timed out (request_timeout)", st.Reason)
			}},
		{name: "FAILED [unconfirmed]", status: func(string) (int, http.Header, []byte) {
			return 200, nil, []byte(`{"status":"FAILED","error":"boom"}`)
		}, state: state.Failed, raw: "FAILED"},
		{name: "CANCELED [unconfirmed]", status: func(string) (int, http.Header, []byte) {
			return 200, nil, []byte(`{"status":"CANCELED"}`)
		}, state: state.Canceled, raw: "CANCELED"},
		{name: "unmapped is unknown", status: func(string) (int, http.Header, []byte) {
			return 200, nil, []byte(`{"status":"PONDERING"}`)
		}, state: state.Unknown, raw: "PONDERING"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			table := map[string]func(string) (int, http.Header, []byte){"GET " + reqPath + "/status": tt.status}
			if tt.result != nil {
				table["GET "+reqPath] = tt.result
			}
			f, _ := route(t, table)
			st, err := newAdapter(t, f, "").Status(context.Background(), provider.Ref{ID: requestID, Model: model})
			require.NoError(t, err)
			require.Equal(t, tt.state, st.State)
			require.Equal(t, tt.raw, st.Raw)
			require.Equal(t, requestID, st.RemoteID)
			if tt.check != nil {
				tt.check(t, st)
			}
			fetched := false
			for _, r := range f.all() {
				fetched = fetched || r.Path == reqPath
				require.Equal(t, "Key "+testToken, r.Header.Get("Authorization"))
			}
			require.Equal(t, tt.wantResult, fetched, "result fetched")
		})
	}
}

func TestStatusUsesStoredURLsElseThePattern(t *testing.T) {
	t.Parallel()
	f, _ := route(t, map[string]func(string) (int, http.Header, []byte){
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
	f, _ := route(t, map[string]func(string) (int, http.Header, []byte){
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
		require.Equal(t, reqPath+"/status", f.last().Path, "fell back to the pattern for %s", u)
	}
}

func TestStatusRefusesABadIDOrModelWithoutACall(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(*http.Request) (int, http.Header, []byte) { return 200, nil, []byte(`{}`) })
	a := newAdapter(t, f, "")
	for _, ref := range []provider.Ref{
		{ID: "../x", Model: model}, {ID: "", Model: model}, {ID: "a/b", Model: model}, {ID: "a?b", Model: model},
		{ID: requestID, Model: "nope"},
	} {
		_, err := a.Status(context.Background(), ref)
		require.Equal(t, provider.Invalid, provider.ClassOf(err), "%+v", ref)
	}
	require.Empty(t, f.all())
}

func TestErrorClasses(t *testing.T) {
	t.Parallel()
	big := make([]byte, 9<<20)
	tests := []struct {
		name       string
		status     int
		header     http.Header
		body       []byte
		class      provider.Class
		retryAfter time.Duration
		message    string
	}{
		{"429", 429, http.Header{"Retry-After": {"7"}}, []byte(`{"detail":"Too many requests"}`), provider.RateLimited, 7 * time.Second, "Too many requests"},
		{"401", 401, nil, fixture(t, "", "unauthorized.json"), provider.Auth, 0, "Unauthorized"},
		{"403", 403, nil, nil, provider.Auth, 0, ""},
		{"404", 404, nil, []byte(`{"detail":"Request not found"}`), provider.NotFound, 0, "Request not found"},
		{"422 on status", 422, nil, fixture(t, "", "result_validation_error.json"), provider.Invalid, 0, "body.prompt: field required"},
		{"500", 500, nil, []byte("<html>oops</html>"), provider.Transient, 0, ""},
		{"503 with Retry-After", 503, http.Header{"Retry-After": {"3"}}, nil, provider.RateLimited, 3 * time.Second, ""},
		{"redirect is not followed", 302, http.Header{"Location": {"https://evil.example/x"}}, nil, provider.Transient, 0, ""},
		{"malformed JSON", 200, nil, []byte(`{"status":`), provider.Transient, 0, "malformed"},
		{"oversized", 200, nil, big, provider.Transient, 0, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, func(*http.Request) (int, http.Header, []byte) { return tt.status, tt.header, tt.body })
			_, err := newAdapter(t, f, "").Status(context.Background(), provider.Ref{ID: requestID, Model: model})
			require.Error(t, err)
			require.Equal(t, tt.class, provider.ClassOf(err), "%v", err)
			require.Equal(t, tt.retryAfter, provider.RetryAfterOf(err))
			require.Contains(t, err.Error(), tt.message)
			require.NotContains(t, err.Error(), testToken, "the key never reaches an error")
			require.Len(t, f.all(), 1)
		})
	}
}

func TestResultErrorsAreNotFinal(t *testing.T) {
	t.Parallel()
	for status, class := range map[int]provider.Class{500: provider.Transient, 404: provider.NotFound, 429: provider.RateLimited, 401: provider.Auth} {
		f, _ := route(t, map[string]func(string) (int, http.Header, []byte){
			"GET " + reqPath + "/status": serve(t, 200, "status_completed.json"),
			"GET " + reqPath:             func(string) (int, http.Header, []byte) { return status, nil, nil },
		})
		_, err := newAdapter(t, f, "").Status(context.Background(), provider.Ref{ID: requestID, Model: model})
		require.Equal(t, class, provider.ClassOf(err), "HTTP %d on the result", status)
	}
}

func TestTimeoutIsTransient(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	f := newFake(t, func(r *http.Request) (int, http.Header, []byte) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return 200, nil, nil
	})
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := newAdapter(t, f, "").Status(ctx, provider.Ref{ID: requestID, Model: model})
	require.Equal(t, provider.Transient, provider.ClassOf(err))
	require.True(t, provider.IsTimeout(err))
}

func TestCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		file   string
		state  state.State
		class  *provider.Class
	}{
		{"OK: removed from the queue", 200, "cancel_ok.json", state.Canceled, nil},
		{"CANCELLATION_REQUESTED is not final", 202, "cancel_requested.json", state.Unknown, nil},
		{"ALREADY_COMPLETED answers the status", 400, "cancel_already_completed.json", state.Succeeded, nil},
		{"NOT_FOUND reconciles", 404, "cancel_not_found.json", "", ptr(provider.NotFound)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, _ := route(t, map[string]func(string) (int, http.Header, []byte){
				"PUT " + reqPath + "/cancel": serve(t, tt.status, tt.file),
				"GET " + reqPath + "/status": serve(t, 200, "status_completed.json"),
				"GET " + reqPath:             serve(t, 200, "result.json"),
			})
			st, err := newAdapter(t, f, "").Cancel(context.Background(), provider.Ref{ID: requestID, Model: model})
			if tt.class != nil {
				require.Equal(t, *tt.class, provider.ClassOf(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.state, st.State)
			require.Equal(t, requestID, st.RemoteID)
			require.Equal(t, http.MethodPut, f.all()[0].Method)
		})
	}
	f := newFake(t, func(*http.Request) (int, http.Header, []byte) { return 500, nil, nil })
	_, err := newAdapter(t, f, "").Cancel(context.Background(), provider.Ref{ID: requestID, Model: model})
	require.Equal(t, provider.Transient, provider.ClassOf(err))
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

func ptr[T any](v T) *T { return &v }

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

// A Retry-After on a 202 status answer is a hint for the next poll.
func TestStatusPollAfterHint(t *testing.T) {
	t.Parallel()
	f, _ := route(t, map[string]func(string) (int, http.Header, []byte){
		"GET " + reqPath + "/status": func(base string) (int, http.Header, []byte) {
			return 202, http.Header{"Retry-After": {"3"}}, fixture(t, base, "status_in_queue.json")
		},
	})
	st, err := newAdapter(t, f, "").Status(context.Background(), provider.Ref{ID: requestID, Model: model})
	require.NoError(t, err)
	require.Equal(t, state.Queued, st.State)
	require.Equal(t, 3*time.Second, st.PollAfter)
}
