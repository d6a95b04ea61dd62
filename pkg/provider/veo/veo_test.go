package veo_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/veo"
	"github.com/pollux-dev/pollux/pkg/state"
)

const (
	testKey = "AIzaSyTESTKEY0123456789"
	opName  = "models/veo-3.1-generate-preview/operations/7u8k2m5x9q1w"
)

var now = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return b
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

type recorded struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
}

// fake is an httptest server answering by method and path ("*" for any)
// and recording what it saw; anything else is a 500.
type fake struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*recorded
}

func newFake(t *testing.T, table map[string]reply) *fake {
	t.Helper()
	f := &fake{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.requests = append(f.requests, &recorded{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
		f.mu.Unlock()
		rep, ok := table[r.Method+" "+r.URL.Path]
		if !ok {
			rep, ok = table["*"]
		}
		if !ok {
			rep = reply{status: 500}
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

func newAdapter(t *testing.T, f *fake) *veo.Adapter {
	t.Helper()
	a, err := veo.NewAdapter(provider.Config{Route: "v", Kind: veo.Kind, BaseURL: f.URL, Token: testKey})
	require.NoError(t, err)
	a.SetNow(func() time.Time { return now })
	return a
}

func TestSubmit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, model, input, want string
	}{
		{"an instance with parameters", "veo-3.1-generate-preview",
			`{"prompt":"a red kite over the sea","parameters":{"aspectRatio":"16:9","durationSeconds":8}}`,
			`{"instances":[{"prompt":"a red kite over the sea"}],"parameters":{"aspectRatio":"16:9","durationSeconds":8}}`},
		{"an instance alone", "models/veo-3.1-generate-preview", `{"prompt":"a kite"}`, `{"instances":[{"prompt":"a kite"}]}`},
		{"the request body itself", "veo-3.1-generate-preview",
			`{"instances":[{"prompt":"a"},{"prompt":"b"}],"parameters":{"sampleCount":2}}`,
			`{"instances":[{"prompt":"a"},{"prompt":"b"}],"parameters":{"sampleCount":2}}`},
		{"no input", "veo-3.1-generate-preview", ``, `{"instances":[{}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, map[string]reply{
				"POST /v1beta/models/veo-3.1-generate-preview:predictLongRunning": {status: 200, body: fixture(t, "submit.json")},
			})
			st, err := newAdapter(t, f).Submit(context.Background(), provider.SubmitRequest{Model: tt.model, Input: json.RawMessage(tt.input)})
			require.NoError(t, err)
			require.Equal(t, opName, st.RemoteID)
			require.Equal(t, state.Queued, st.State, "accepted, not known to run")
			require.Equal(t, "done=false", st.Raw)
			req := f.all()[0]
			require.Equal(t, testKey, req.Header.Get("x-goog-api-key"))
			require.Empty(t, req.RawQuery, "the key never goes in the URL")
			require.JSONEq(t, tt.want, string(req.Body))
		})
	}
}

func TestSubmitRefusesWithoutACall(t *testing.T) {
	t.Parallel()
	f := newFake(t, nil)
	a := newAdapter(t, f)
	for _, tt := range []struct{ model, input string }{
		{"", `{}`}, {"Veo-3", `{}`}, {"veo/../x", `{}`}, {"veo:predict", `{}`}, {"veo-3?x=1", `{}`},
		{"veo-3", `[]`}, {"veo-3", `"prompt"`},
	} {
		_, err := a.Submit(context.Background(), provider.SubmitRequest{Model: tt.model, Input: json.RawMessage(tt.input)})
		require.Equal(t, provider.Invalid, provider.ClassOf(err), "%+v", tt)
	}
	require.Empty(t, f.all())
}

func TestStatusMapsEveryOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fixture string
		state   state.State
		raw     string
		check   func(*testing.T, provider.Status)
	}{
		{"operation_running.json", state.Running, "done=false", nil},
		{"operation_succeeded.json", state.Succeeded, "done=true", func(t *testing.T, st provider.Status) {
			require.Equal(t, []string{"https://generativelanguage.googleapis.com/v1beta/files/3x9k2m1q8w7e:download?alt=media"}, st.Outputs)
			require.Equal(t, now.Add(48*time.Hour), st.OutputsExpireAt)
		}},
		{"operation_filtered.json", state.Failed, "done=true", func(t *testing.T, st provider.Status) {
			require.Equal(t, "blocked by Google's safety filters: The prompt could not be submitted. It may violate the usage guidelines.", st.Reason)
			require.Empty(t, st.Outputs)
		}},
		{"operation_failed.json", state.Failed, "done=true", func(t *testing.T, st provider.Status) {
			require.Equal(t, "Video generation failed due to an internal error. (code 13)", st.Reason)
		}},
		{"operation_cancelled.json", state.Canceled, "done=true", nil},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, map[string]reply{"GET /v1beta/" + opName: {status: 200, body: fixture(t, tt.fixture)}})
			st, err := newAdapter(t, f).Status(context.Background(), provider.Ref{ID: opName, Model: "veo-3.1-generate-preview"})
			require.NoError(t, err)
			require.Equal(t, opName, st.RemoteID)
			require.Equal(t, tt.state, st.State)
			require.Equal(t, tt.raw, st.Raw)
			if tt.check != nil {
				tt.check(t, st)
			}
			require.Equal(t, testKey, f.all()[0].Header.Get("x-goog-api-key"))
		})
	}
}

func TestStatusEdgeValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body   string
		state  state.State
		reason string
	}{
		{`{"name":"` + opName + `","done":true}`, state.Unknown, ""},
		{`{"name":"` + opName + `","done":true,"response":{}}`, state.Failed, "without a video"},
		{`{"name":"` + opName + `","done":true,"response":{"generateVideoResponse":{"raiMediaFilteredCount":2}}}`, state.Failed, "2 videos filtered"},
		{`{"name":"` + opName + `","done":true,"response":{"generateVideoResponse":{"generatedSamples":[{"video":{"uri":"gs://bucket/x.mp4"}}]}}}`, state.Failed, "without a video"},
		{`{"name":"` + opName + `","done":false,"error":{"code":3}}`, state.Running, ""},
	}
	for _, tt := range tests {
		f := newFake(t, map[string]reply{"*": {status: 200, body: []byte(tt.body)}})
		st, err := newAdapter(t, f).Status(context.Background(), provider.Ref{ID: opName})
		require.NoError(t, err, tt.body)
		require.Equal(t, tt.state, st.State, tt.body)
		require.Contains(t, st.Reason, tt.reason)
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
		{"404: unknown operation", reply{404, nil, fixture(t, "not_found.json")}, provider.NotFound, 0, "NOT_FOUND: Operation not found"},
		{"429 with RetryInfo", reply{429, nil, fixture(t, "resource_exhausted.json")}, provider.RateLimited, 41 * time.Second, "RESOURCE_EXHAUSTED"},
		{"429 Retry-After wins", reply{429, http.Header{"Retry-After": {"5"}}, fixture(t, "resource_exhausted.json")}, provider.RateLimited, 5 * time.Second, ""},
		{"400 API_KEY_INVALID is auth", reply{400, nil, fixture(t, "api_key_invalid.json")}, provider.Auth, 0, "API key not valid"},
		{"400 is invalid", reply{400, nil, fixture(t, "invalid_argument.json")}, provider.Invalid, 0, "Unsupported video generation request"},
		{"403", reply{403, nil, []byte(`{"error":{"code":403,"message":"denied","status":"PERMISSION_DENIED"}}`)}, provider.Auth, 0, "PERMISSION_DENIED"},
		{"500", reply{500, nil, []byte(`{"error":{"code":500,"message":"Internal error","status":"INTERNAL"}}`)}, provider.Transient, 0, "INTERNAL"},
		{"503 HTML", reply{503, nil, []byte(`<html>`)}, provider.Transient, 0, ""},
		{"malformed", reply{200, nil, []byte(`{"name":`)}, provider.Transient, 0, "malformed"},
		{"no name", reply{200, nil, []byte(`{"done":true}`)}, provider.Transient, 0, "valid name"},
		{"oversized", reply{200, nil, big}, provider.Transient, 0, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, map[string]reply{"*": tt.rep})
			_, err := newAdapter(t, f).Status(context.Background(), provider.Ref{ID: opName})
			require.Error(t, err)
			require.Equal(t, tt.class, provider.ClassOf(err), "%v", err)
			require.Equal(t, tt.retryAfter, provider.RetryAfterOf(err))
			require.Contains(t, err.Error(), tt.message)
			require.NotContains(t, err.Error(), testKey)
		})
	}
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
	a, err := veo.NewAdapter(provider.Config{Route: "v", BaseURL: srv.URL, Token: testKey})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = a.Status(ctx, provider.Ref{ID: opName})
	require.Equal(t, provider.Transient, provider.ClassOf(err))
	require.True(t, provider.IsTimeout(err))
}

func TestStatusRefusesABadNameWithoutACall(t *testing.T) {
	t.Parallel()
	f := newFake(t, nil)
	for _, id := range []string{"", "operations/", "models/veo/operations/../../files", "files/abc", "models/veo/operations/a?b", "https://evil.example/x"} {
		_, err := newAdapter(t, f).Status(context.Background(), provider.Ref{ID: id})
		require.Equal(t, provider.Invalid, provider.ClassOf(err), id)
	}
	require.Empty(t, f.all())
}

func TestCancelIsUnsupported(t *testing.T) {
	t.Parallel()
	f := newFake(t, nil)
	a := newAdapter(t, f)
	_, err := a.Cancel(context.Background(), provider.Ref{ID: opName})
	require.True(t, errors.Is(err, provider.ErrUnsupported))
	require.Equal(t, provider.Info{Kind: veo.Kind}, a.Info())
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := veo.New(provider.Config{Route: "v"})
	require.ErrorContains(t, err, "token")
	_, err = veo.New(provider.Config{Route: "v", Token: "k", Options: json.RawMessage(`{"region":"us"}`)})
	require.ErrorContains(t, err, "region")
	_, err = veo.New(provider.Config{Route: "v", Token: "k", WebhookSecret: "s"})
	require.ErrorContains(t, err, "webhook")
	_, err = veo.New(provider.Config{Route: "v", Token: "k", Options: json.RawMessage(`{}`)})
	require.NoError(t, err)
}

func FuzzParseOperation(f *testing.F) {
	for _, name := range []string{"submit.json", "operation_running.json", "operation_succeeded.json",
		"operation_filtered.json", "operation_failed.json", "operation_cancelled.json"} {
		f.Add(fixture(f, name))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		st, err := veo.ParseOperation(body, now)
		if err != nil {
			return
		}
		require.NotEmpty(t, st.RemoteID)
		if st.State.Terminal() {
			require.Equal(t, "done=true", st.Raw, "only a done operation is terminal")
		}
		if st.State == state.Succeeded {
			require.NotEmpty(t, st.Outputs, "success needs a video")
		}
		require.LessOrEqual(t, len(st.Outputs), 100)
	})
}
