package runway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/runway"
	"github.com/pollux-dev/pollux/pkg/state"
)

const (
	testToken = "key_test_runway"
	taskID    = "17f20503-6c24-4c16-946b-35dbbce2af2f"
	taskPath  = "/v1/tasks/" + taskID
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return b
}

// fake is an httptest server answering by method and path from a table and
// recording the requests it saw; anything else is a 500.
type fake struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*recorded
}

type recorded struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func newFake(t *testing.T, table map[string]reply) *fake {
	t.Helper()
	f := &fake{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.requests = append(f.requests, &recorded{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		f.mu.Unlock()
		rep, ok := table[r.Method+" "+r.URL.Path]
		if !ok {
			rep, ok = table["*"]
		}
		if !ok {
			rep = reply{status: 500, body: []byte(`{"error":"unexpected"}`)}
		}
		for k, v := range rep.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rep.status)
		_, _ = w.Write(rep.body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) all() []*recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*recorded(nil), f.requests...)
}

func newAdapter(t *testing.T, f *fake, opts string) *runway.Adapter {
	t.Helper()
	cfg := provider.Config{Route: "rw", Kind: runway.Kind, BaseURL: f.URL, Token: testToken}
	if opts != "" {
		cfg.Options = json.RawMessage(opts)
	}
	a, err := runway.NewAdapter(cfg)
	require.NoError(t, err)
	return a
}

func TestSubmit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		model, opts, path, sentModel string
	}{
		{"gen4_turbo", "", "/v1/image_to_video", "gen4_turbo"},
		{"text_to_video:veo3.1", "", "/v1/text_to_video", "veo3.1"},
		{"gen4_aleph", `{"endpoint":"video_to_video"}`, "/v1/video_to_video", "gen4_aleph"},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, map[string]reply{"POST " + tt.path: {status: 200, body: fixture(t, "create.json")}})
			st, err := newAdapter(t, f, tt.opts).Submit(context.Background(), provider.SubmitRequest{
				JobID: "job-1", Model: tt.model,
				Input: json.RawMessage(`{"promptText":"a red kite over the sea","promptImage":"https://example.com/kite.png","ratio":"1280:720"}`),
			})
			require.NoError(t, err)
			require.Equal(t, taskID, st.RemoteID)
			require.Equal(t, state.Queued, st.State)
			req := f.all()[0]
			require.Equal(t, "Bearer "+testToken, req.Header.Get("Authorization"))
			require.Equal(t, "2024-11-06", req.Header.Get("X-Runway-Version"))
			var body map[string]any
			require.NoError(t, json.Unmarshal(req.Body, &body))
			require.Equal(t, map[string]any{"model": tt.sentModel, "promptText": "a red kite over the sea",
				"promptImage": "https://example.com/kite.png", "ratio": "1280:720"}, body)
		})
	}
}

func TestSubmitVersionOverride(t *testing.T) {
	t.Parallel()
	f := newFake(t, map[string]reply{"POST /v1/image_to_video": {status: 200, body: fixture(t, "create.json")}})
	_, err := newAdapter(t, f, `{"version":"2025-09-01"}`).Submit(context.Background(), provider.SubmitRequest{Model: "gen4_turbo"})
	require.NoError(t, err)
	require.Equal(t, "2025-09-01", f.all()[0].Header.Get("X-Runway-Version"))
}

func TestSubmitRefusesWithoutACall(t *testing.T) {
	t.Parallel()
	f := newFake(t, nil)
	a := newAdapter(t, f, "")
	for _, tt := range []struct{ model, input string }{
		{"", `{}`}, {"../x", `{}`}, {"image_to_video:", `{}`}, {"Image_To_Video:gen4", `{}`}, {"a:b:c", `{}`},
		{"gen4_turbo", `[]`}, {"gen4_turbo", `"x"`}, {"gen4_turbo", `{"model":"gen3a_turbo"}`},
	} {
		_, err := a.Submit(context.Background(), provider.SubmitRequest{Model: tt.model, Input: json.RawMessage(tt.input)})
		require.Equal(t, provider.Invalid, provider.ClassOf(err), "%+v", tt)
	}
	require.Empty(t, f.all())
}

func TestStatusMapsEveryState(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		fixture string
		state   state.State
		raw     string
		check   func(*testing.T, provider.Status)
	}{
		{"task_pending.json", state.Queued, "PENDING", func(t *testing.T, st provider.Status) {
			require.Equal(t, created, st.CreatedAt)
		}},
		{"task_throttled.json", state.Queued, "THROTTLED", nil},
		{"task_running.json", state.Running, "RUNNING", func(t *testing.T, st provider.Status) {
			require.NotNil(t, st.Progress)
			require.InDelta(t, 0.42, *st.Progress, 1e-9)
		}},
		{"task_succeeded.json", state.Succeeded, "SUCCEEDED", func(t *testing.T, st provider.Status) {
			require.Equal(t, []string{"https://dnznrvs05pmza.cloudfront.net/1b1e7a04/output.mp4?_jwt=eyJhbGciOiJIUzI1NiJ9.e30.sig"}, st.Outputs)
			require.Equal(t, created.Add(24*time.Hour), st.OutputsExpireAt, "the earliest of \"24-48 hours\"")
		}},
		{"task_failed.json", state.Failed, "FAILED", func(t *testing.T, st provider.Status) {
			require.Equal(t, "The prompt was flagged by content moderation. (SAFETY.INPUT.TEXT)", st.Reason)
		}},
		{"task_cancelled.json", state.Canceled, "CANCELLED", nil},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, map[string]reply{"GET " + taskPath: {status: 200, body: fixture(t, tt.fixture)}})
			st, err := newAdapter(t, f, "").Status(context.Background(), provider.Ref{ID: taskID})
			require.NoError(t, err)
			require.Equal(t, taskID, st.RemoteID)
			require.Equal(t, tt.state, st.State)
			require.Equal(t, tt.raw, st.Raw)
			if tt.check != nil {
				tt.check(t, st)
			}
			require.Equal(t, "2024-11-06", f.all()[0].Header.Get("X-Runway-Version"))
		})
	}
}

func TestStatusEdgeValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body  string
		state state.State
		check func(*testing.T, provider.Status)
	}{
		{`{"id":"t1","status":"ASSEMBLING"}`, state.Unknown, nil},
		{`{"id":"t1","status":"running"}`, state.Unknown, nil}, // values are upper case
		{`{"id":"t1","status":"RUNNING","progress":1.7}`, state.Running, func(t *testing.T, st provider.Status) {
			require.InDelta(t, 1.0, *st.Progress, 1e-9)
		}},
		{`{"id":"t1","status":"RUNNING","progress":-2}`, state.Running, func(t *testing.T, st provider.Status) {
			require.InDelta(t, 0.0, *st.Progress, 1e-9)
		}},
		{`{"id":"t1","status":"SUCCEEDED","output":["ftp://x","https://ok.example/a.mp4",3]}`, state.Succeeded, func(t *testing.T, st provider.Status) {
			require.Equal(t, []string{"https://ok.example/a.mp4"}, st.Outputs)
			require.True(t, st.OutputsExpireAt.IsZero(), "no createdAt, no expiry")
		}},
		{`{"id":"t1","status":"FAILED"}`, state.Failed, func(t *testing.T, st provider.Status) {
			require.NotEmpty(t, st.Reason)
		}},
	}
	for _, tt := range tests {
		f := newFake(t, map[string]reply{"*": {status: 200, body: []byte(tt.body)}})
		st, err := newAdapter(t, f, "").Status(context.Background(), provider.Ref{ID: "t1"})
		require.NoError(t, err, tt.body)
		require.Equal(t, tt.state, st.State, tt.body)
		if tt.check != nil {
			tt.check(t, st)
		}
	}
}

func TestErrorClasses(t *testing.T) {
	t.Parallel()
	big := make([]byte, 9<<20)
	tests := []struct {
		name       string
		rep        reply
		class      provider.Class
		retryAfter time.Duration
		message    string
	}{
		{"429", reply{429, http.Header{"Retry-After": {"12"}}, fixture(t, "throttled.json")}, provider.RateLimited, 12 * time.Second, "rate limit"},
		{"401", reply{401, nil, fixture(t, "unauthenticated.json")}, provider.Auth, 0, "Invalid API key"},
		{"403", reply{403, nil, nil}, provider.Auth, 0, ""},
		{"400", reply{400, nil, fixture(t, "invalid_input.json")}, provider.Invalid, 0, "promptImage is required"},
		{"404 (deleted)", reply{404, nil, fixture(t, "not_found.json")}, provider.NotFound, 0, "not found"},
		{"500", reply{500, nil, []byte("oops")}, provider.Transient, 0, ""},
		{"502", reply{502, nil, []byte("<html>")}, provider.Transient, 0, ""},
		{"malformed", reply{200, nil, []byte(`{"id":`)}, provider.Transient, 0, "malformed"},
		{"no id", reply{200, nil, []byte(`{"status":"SUCCEEDED"}`)}, provider.Transient, 0, "without a valid id"},
		{"oversized", reply{200, nil, big}, provider.Transient, 0, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, map[string]reply{"*": tt.rep})
			_, err := newAdapter(t, f, "").Status(context.Background(), provider.Ref{ID: taskID})
			require.Error(t, err)
			require.Equal(t, tt.class, provider.ClassOf(err), "%v", err)
			require.Equal(t, tt.retryAfter, provider.RetryAfterOf(err))
			require.Contains(t, err.Error(), tt.message)
			require.NotContains(t, err.Error(), testToken)
		})
	}
}

func TestSubmit429IsARateLimitNotAFailure(t *testing.T) {
	t.Parallel()
	f := newFake(t, map[string]reply{"*": {429, nil, fixture(t, "throttled.json")}})
	_, err := newAdapter(t, f, "").Submit(context.Background(), provider.SubmitRequest{Model: "gen4_turbo"})
	require.Equal(t, provider.RateLimited, provider.ClassOf(err))
}

func TestTimeoutIsTransient(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	defer close(release)
	a, err := runway.NewAdapter(provider.Config{Route: "rw", BaseURL: srv.URL, Token: testToken})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = a.Status(ctx, provider.Ref{ID: taskID})
	require.Equal(t, provider.Transient, provider.ClassOf(err))
	require.True(t, provider.IsTimeout(err))
}

func TestStatusRefusesABadIDWithoutACall(t *testing.T) {
	t.Parallel()
	f := newFake(t, nil)
	for _, id := range []string{"", "../x", "a/b", "a?b", "a b"} {
		_, err := newAdapter(t, f, "").Status(context.Background(), provider.Ref{ID: id})
		require.Equal(t, provider.Invalid, provider.ClassOf(err), id)
	}
	require.Empty(t, f.all())
}

func TestCancelDeletesAnUnfinishedTask(t *testing.T) {
	t.Parallel()
	for _, running := range []string{"task_pending.json", "task_throttled.json", "task_running.json"} {
		f := newFake(t, map[string]reply{
			"GET " + taskPath:    {status: 200, body: fixture(t, running)},
			"DELETE " + taskPath: {status: 204},
		})
		st, err := newAdapter(t, f, "").Cancel(context.Background(), provider.Ref{ID: taskID})
		require.NoError(t, err)
		require.Equal(t, state.Canceled, st.State, running)
		require.Equal(t, taskID, st.RemoteID)
		reqs := f.all()
		require.Len(t, reqs, 2)
		require.Equal(t, http.MethodDelete, reqs[1].Method)
	}
}

func TestCancelNeverDeletesAFinishedTask(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]state.State{
		"task_succeeded.json": state.Succeeded, "task_failed.json": state.Failed, "task_cancelled.json": state.Canceled,
	} {
		f := newFake(t, map[string]reply{"GET " + taskPath: {status: 200, body: fixture(t, file)}})
		st, err := newAdapter(t, f, "").Cancel(context.Background(), provider.Ref{ID: taskID})
		require.NoError(t, err)
		require.Equal(t, want, st.State, file)
		for _, r := range f.all() {
			require.NotEqual(t, http.MethodDelete, r.Method, "DELETE would remove %s's outputs", file)
		}
	}
}

func TestCancelOfADeletedTaskReconciles(t *testing.T) {
	t.Parallel()
	f := newFake(t, map[string]reply{"GET " + taskPath: {status: 404, body: fixture(t, "not_found.json")}})
	_, err := newAdapter(t, f, "").Cancel(context.Background(), provider.Ref{ID: taskID})
	require.Equal(t, provider.NotFound, provider.ClassOf(err))
}

func TestInfo(t *testing.T) {
	t.Parallel()
	f := newFake(t, nil)
	require.Equal(t, provider.Info{Kind: runway.Kind, Cancel: true, PollFloor: 5 * time.Second}, newAdapter(t, f, "").Info())
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for opts, want := range map[string]string{
		`{"bogus":1}`:               "bogus",
		`{"endpoint":"../admin"}`:   "options.endpoint",
		`{"version":"latest"}`:      "options.version",
		`{"endpoint":"x?y=1"}`:      "options.endpoint",
		`{"version":"2024-11-06"} `: "",
	} {
		_, err := runway.New(provider.Config{Route: "rw", Token: "t", Options: json.RawMessage(opts)})
		if want == "" {
			require.NoError(t, err)
			continue
		}
		require.ErrorContains(t, err, want)
	}
	_, err := runway.New(provider.Config{Route: "rw"})
	require.ErrorContains(t, err, "token")
	_, err = runway.New(provider.Config{Route: "rw", Token: "t", WebhookSecret: "s"})
	require.ErrorContains(t, err, "webhook")
}

func FuzzParseTask(f *testing.F) {
	for _, name := range []string{"task_pending.json", "task_throttled.json", "task_running.json",
		"task_succeeded.json", "task_failed.json", "task_cancelled.json"} {
		f.Add(fixture(f, name))
	}
	f.Add([]byte(`{"id":"t","status":"RUNNING","progress":1e309}`))
	terminal := map[string]bool{"SUCCEEDED": true, "FAILED": true, "CANCELLED": true}
	f.Fuzz(func(t *testing.T, body []byte) {
		st, err := runway.ParseTask(body)
		if err != nil {
			return
		}
		require.NotEmpty(t, st.RemoteID)
		if st.State.Terminal() {
			require.True(t, terminal[st.Raw], "terminal only from a known terminal value, got %q", st.Raw)
		}
		if st.Progress != nil {
			require.True(t, *st.Progress >= 0 && *st.Progress <= 1, "progress %v", *st.Progress)
		}
		require.LessOrEqual(t, len(st.Outputs), 100)
	})
}

// A Retry-After on a successful status answer is a hint for the next poll.
func TestStatusPollAfterHint(t *testing.T) {
	t.Parallel()
	f := newFake(t, map[string]reply{"GET " + taskPath: {status: 200, header: http.Header{"Retry-After": {"6"}}, body: fixture(t, "task_running.json")}})
	st, err := newAdapter(t, f, "").Status(context.Background(), provider.Ref{ID: taskID})
	require.NoError(t, err)
	require.Equal(t, 6*time.Second, st.PollAfter)
}
