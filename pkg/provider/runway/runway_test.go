package runway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/providertest"
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

func newAdapter(t *testing.T, f *providertest.Server, opts string) *runway.Adapter {
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
			f := providertest.NewServer(t, map[string]providertest.Reply{"POST " + tt.path: {Status: 200, Body: fixture(t, "create.json")}})
			st, err := newAdapter(t, f, tt.opts).Submit(context.Background(), provider.SubmitRequest{
				JobID: "job-1", Model: tt.model,
				Input: json.RawMessage(`{"promptText":"a red kite over the sea","promptImage":"https://example.com/kite.png","ratio":"1280:720"}`),
			})
			require.NoError(t, err)
			require.Equal(t, taskID, st.RemoteID)
			require.Equal(t, state.Queued, st.State)
			req := f.Requests()[0]
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
	f := providertest.NewServer(t, map[string]providertest.Reply{"POST /v1/image_to_video": {Status: 200, Body: fixture(t, "create.json")}})
	_, err := newAdapter(t, f, `{"version":"2025-09-01"}`).Submit(context.Background(), provider.SubmitRequest{Model: "gen4_turbo"})
	require.NoError(t, err)
	require.Equal(t, "2025-09-01", f.Requests()[0].Header.Get("X-Runway-Version"))
}

func TestSubmitRefusesWithoutACall(t *testing.T) {
	t.Parallel()
	f := providertest.NewServer(t, nil)
	a := newAdapter(t, f, "")
	for _, tt := range []struct{ model, input string }{
		{"", `{}`}, {"../x", `{}`}, {"image_to_video:", `{}`}, {"Image_To_Video:gen4", `{}`}, {"a:b:c", `{}`},
		{"gen4_turbo", `[]`}, {"gen4_turbo", `"x"`}, {"gen4_turbo", `{"model":"gen3a_turbo"}`},
	} {
		_, err := a.Submit(context.Background(), provider.SubmitRequest{Model: tt.model, Input: json.RawMessage(tt.input)})
		require.Equal(t, provider.Invalid, provider.ClassOf(err), "%+v", tt)
	}
	require.Empty(t, f.Requests())
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
		f := providertest.NewServer(t, map[string]providertest.Reply{"*": {Status: 200, Body: []byte(tt.body)}})
		st, err := newAdapter(t, f, "").Status(context.Background(), provider.Ref{ID: "t1"})
		require.NoError(t, err, tt.body)
		require.Equal(t, tt.state, st.State, tt.body)
		if tt.check != nil {
			tt.check(t, st)
		}
	}
}

func TestCancelOfADeletedTaskReconciles(t *testing.T) {
	t.Parallel()
	f := providertest.NewServer(t, map[string]providertest.Reply{"GET " + taskPath: {Status: 404, Body: fixture(t, "not_found.json")}})
	_, err := newAdapter(t, f, "").Cancel(context.Background(), provider.Ref{ID: taskID})
	require.Equal(t, provider.NotFound, provider.ClassOf(err))
}

func TestInfo(t *testing.T) {
	t.Parallel()
	f := providertest.NewServer(t, nil)
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

func TestConformance(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	get, del := "GET "+taskPath, "DELETE "+taskPath
	ok := func(name string) providertest.Reply { return providertest.OK(fixture(t, name)) }
	providertest.Run(t, providertest.Harness{
		New:         func(t *testing.T, srv *providertest.Server) provider.Adapter { return newAdapter(t, srv, "") },
		Token:       testToken,
		Submit:      provider.SubmitRequest{JobID: "job-1", Model: "gen4_turbo", Input: json.RawMessage(`{"promptText":"a kite"}`)},
		SubmitKey:   "POST /v1/image_to_video",
		SubmitReply: ok("create.json"),
		SubmittedID: taskID,
		Ref:         provider.Ref{ID: taskID},
		StatusKey:   get,
		States: []providertest.StateCase{
			{Name: "PENDING", Reply: ok("task_pending.json"), State: state.Queued, Check: func(t *testing.T, st provider.Status) {
				require.Equal(t, "PENDING", st.Raw)
				require.Equal(t, created, st.CreatedAt)
			}},
			{Name: "THROTTLED", Reply: ok("task_throttled.json"), State: state.Queued},
			{Name: "RUNNING", Reply: ok("task_running.json"), State: state.Running, Check: func(t *testing.T, st provider.Status) {
				require.NotNil(t, st.Progress)
				require.InDelta(t, 0.42, *st.Progress, 1e-9)
			}},
			{Name: "SUCCEEDED", Reply: ok("task_succeeded.json"), State: state.Succeeded, Check: func(t *testing.T, st provider.Status) {
				require.Equal(t, []string{"https://dnznrvs05pmza.cloudfront.net/1b1e7a04/output.mp4?_jwt=eyJhbGciOiJIUzI1NiJ9.e30.sig"}, st.Outputs)
				require.Equal(t, created.Add(24*time.Hour), st.OutputsExpireAt, "the earliest of \"24-48 hours\"")
			}},
			{Name: "FAILED", Reply: ok("task_failed.json"), State: state.Failed, Check: func(t *testing.T, st provider.Status) {
				require.Equal(t, "The prompt was flagged by content moderation. (SAFETY.INPUT.TEXT)", st.Reason)
			}},
			{Name: "CANCELLED", Reply: ok("task_cancelled.json"), State: state.Canceled},
		},
		NotFound: providertest.Reply{Status: 404, Body: fixture(t, "not_found.json")},
		Errors: []providertest.ErrorCase{
			{Name: "429 sample", Reply: providertest.Reply{Status: 429, Header: http.Header{"Retry-After": {"12"}}, Body: fixture(t, "throttled.json")}, Class: provider.RateLimited, RetryAfter: 12 * time.Second, Message: "rate limit"},
			{Name: "401 sample", Reply: providertest.Reply{Status: 401, Body: fixture(t, "unauthenticated.json")}, Class: provider.Auth, Message: "Invalid API key"},
			{Name: "400 sample", Reply: providertest.Reply{Status: 400, Body: fixture(t, "invalid_input.json")}, Class: provider.Invalid, Message: "promptImage is required"},
			{Name: "no id", Reply: providertest.OK([]byte(`{"status":"SUCCEEDED"}`)), Class: provider.Transient, Message: "without a valid id"},
		},
		BadIDs: []string{"a/b"},
		// An unfinished task is deleted; a finished one never is (DELETE
		// would remove its outputs).
		Cancels: []providertest.CancelCase{
			{Name: "pending", Replies: map[string]providertest.Reply{get: ok("task_pending.json"), del: {Status: 204}}, State: state.Canceled, Calls: []string{get, del}},
			{Name: "throttled", Replies: map[string]providertest.Reply{get: ok("task_throttled.json"), del: {Status: 204}}, State: state.Canceled, Calls: []string{get, del}},
			{Name: "running", Replies: map[string]providertest.Reply{get: ok("task_running.json"), del: {Status: 204}}, State: state.Canceled, Calls: []string{get, del}},
			{Name: "succeeded", Replies: map[string]providertest.Reply{get: ok("task_succeeded.json")}, State: state.Succeeded, Calls: []string{get}},
			{Name: "failed", Replies: map[string]providertest.Reply{get: ok("task_failed.json")}, State: state.Failed, Calls: []string{get}},
			{Name: "cancelled", Replies: map[string]providertest.Reply{get: ok("task_cancelled.json")}, State: state.Canceled, Calls: []string{get}},
		},
		PollAfter: true,
	})
}
