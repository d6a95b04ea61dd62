package veo_test

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

func newAdapter(t *testing.T, f *providertest.Server) *veo.Adapter {
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
			f := providertest.NewServer(t, map[string]providertest.Reply{
				"POST /v1beta/models/veo-3.1-generate-preview:predictLongRunning": {Status: 200, Body: fixture(t, "submit.json")},
			})
			st, err := newAdapter(t, f).Submit(context.Background(), provider.SubmitRequest{Model: tt.model, Input: json.RawMessage(tt.input)})
			require.NoError(t, err)
			require.Equal(t, opName, st.RemoteID)
			require.Equal(t, state.Queued, st.State, "accepted, not known to run")
			require.Equal(t, "done=false", st.Raw)
			req := f.Requests()[0]
			require.Equal(t, testKey, req.Header.Get("x-goog-api-key"))
			require.Empty(t, req.RawQuery, "the key never goes in the URL")
			require.JSONEq(t, tt.want, string(req.Body))
		})
	}
}

func TestSubmitRefusesWithoutACall(t *testing.T) {
	t.Parallel()
	f := providertest.NewServer(t, nil)
	a := newAdapter(t, f)
	for _, tt := range []struct{ model, input string }{
		{"", `{}`}, {"Veo-3", `{}`}, {"veo/../x", `{}`}, {"veo:predict", `{}`}, {"veo-3?x=1", `{}`},
		{"veo-3", `[]`}, {"veo-3", `"prompt"`},
	} {
		_, err := a.Submit(context.Background(), provider.SubmitRequest{Model: tt.model, Input: json.RawMessage(tt.input)})
		require.Equal(t, provider.Invalid, provider.ClassOf(err), "%+v", tt)
	}
	require.Empty(t, f.Requests())
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
		f := providertest.NewServer(t, map[string]providertest.Reply{"*": {Status: 200, Body: []byte(tt.body)}})
		st, err := newAdapter(t, f).Status(context.Background(), provider.Ref{ID: opName})
		require.NoError(t, err, tt.body)
		require.Equal(t, tt.state, st.State, tt.body)
		require.Contains(t, st.Reason, tt.reason)
	}
}

func TestStatusRefusesABadNameWithoutACall(t *testing.T) {
	t.Parallel()
	f := providertest.NewServer(t, nil)
	for _, id := range []string{"", "operations/", "models/veo/operations/../../files", "files/abc", "models/veo/operations/a?b", "https://evil.example/x"} {
		_, err := newAdapter(t, f).Status(context.Background(), provider.Ref{ID: id})
		require.Equal(t, provider.Invalid, provider.ClassOf(err), id)
	}
	require.Empty(t, f.Requests())
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

func TestConformance(t *testing.T) {
	t.Parallel()
	ok := func(name string) providertest.Reply { return providertest.OK(fixture(t, name)) }
	providertest.Run(t, providertest.Harness{
		New:         func(t *testing.T, srv *providertest.Server) provider.Adapter { return newAdapter(t, srv) },
		Token:       testKey,
		Submit:      provider.SubmitRequest{Model: "veo-3.1-generate-preview", Input: json.RawMessage(`{"prompt":"a kite"}`)},
		SubmitKey:   "POST /v1beta/models/veo-3.1-generate-preview:predictLongRunning",
		SubmitReply: ok("submit.json"),
		SubmittedID: opName,
		Ref:         provider.Ref{ID: opName, Model: "veo-3.1-generate-preview"},
		StatusKey:   "GET /v1beta/" + opName,
		States: []providertest.StateCase{
			{Name: "operation_running.json", Reply: ok("operation_running.json"), State: state.Running, Check: func(t *testing.T, st provider.Status) {
				require.Equal(t, "done=false", st.Raw)
			}},
			{Name: "operation_succeeded.json", Reply: ok("operation_succeeded.json"), State: state.Succeeded, Check: func(t *testing.T, st provider.Status) {
				require.Equal(t, "done=true", st.Raw)
				require.Equal(t, []string{"https://generativelanguage.googleapis.com/v1beta/files/3x9k2m1q8w7e:download?alt=media"}, st.Outputs)
				require.Equal(t, now.Add(48*time.Hour), st.OutputsExpireAt)
			}},
			{Name: "operation_filtered.json", Reply: ok("operation_filtered.json"), State: state.Failed, Check: func(t *testing.T, st provider.Status) {
				require.Equal(t, "blocked by Google's safety filters: The prompt could not be submitted. It may violate the usage guidelines.", st.Reason)
				require.Empty(t, st.Outputs)
			}},
			{Name: "operation_failed.json", Reply: ok("operation_failed.json"), State: state.Failed, Check: func(t *testing.T, st provider.Status) {
				require.Equal(t, "Video generation failed due to an internal error. (code 13)", st.Reason)
			}},
			{Name: "operation_cancelled.json", Reply: ok("operation_cancelled.json"), State: state.Canceled},
		},
		NotFound: providertest.Reply{Status: 404, Body: fixture(t, "not_found.json")},
		Errors: []providertest.ErrorCase{
			{Name: "404 sample", Reply: providertest.Reply{Status: 404, Body: fixture(t, "not_found.json")}, Class: provider.NotFound, Message: "NOT_FOUND: Operation not found"},
			{Name: "429 with RetryInfo", Reply: providertest.Reply{Status: 429, Body: fixture(t, "resource_exhausted.json")}, Class: provider.RateLimited, RetryAfter: 41 * time.Second, Message: "RESOURCE_EXHAUSTED"},
			{Name: "429 Retry-After wins", Reply: providertest.Reply{Status: 429, Header: http.Header{"Retry-After": {"5"}}, Body: fixture(t, "resource_exhausted.json")}, Class: provider.RateLimited, RetryAfter: 5 * time.Second},
			{Name: "400 API_KEY_INVALID is auth", Reply: providertest.Reply{Status: 400, Body: fixture(t, "api_key_invalid.json")}, Class: provider.Auth, Message: "API key not valid"},
			{Name: "400 is invalid", Reply: providertest.Reply{Status: 400, Body: fixture(t, "invalid_argument.json")}, Class: provider.Invalid, Message: "Unsupported video generation request"},
			{Name: "403 sample", Reply: providertest.Reply{Status: 403, Body: []byte(`{"error":{"code":403,"message":"denied","status":"PERMISSION_DENIED"}}`)}, Class: provider.Auth, Message: "PERMISSION_DENIED"},
			{Name: "500 sample", Reply: providertest.Reply{Status: 500, Body: []byte(`{"error":{"code":500,"message":"Internal error","status":"INTERNAL"}}`)}, Class: provider.Transient, Message: "INTERNAL"},
			{Name: "no name", Reply: providertest.OK([]byte(`{"done":true}`)), Class: provider.Transient, Message: "valid name"},
		},
		BadIDs: []string{"operations/", "models/veo/operations/../../files", "files/abc", "models/veo/operations/a?b", "https://evil.example/x"},
	})
}

// An image Pollux delivered inline as a data: URI is unwrapped into the
// plain base64 the Gemini API takes; one delivered as a URL is refused
// naming the setting; plain base64 passes as it is.
func TestImagesInline(t *testing.T) {
	t.Parallel()
	got, err := veo.RequestBody(json.RawMessage(`{"instances":[{"prompt":"p","image":{"bytesBase64Encoded":"data:image/png;base64,iVBORw0K","mimeType":"image/png"}}]}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"instances":[{"prompt":"p","image":{"bytesBase64Encoded":"iVBORw0K","mimeType":"image/png"}}]}`, string(got))
	got, err = veo.RequestBody(json.RawMessage(`{"prompt":"p","lastFrame":{"bytesBase64Encoded":"data:image/png;base64,AAAA"}}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"instances":[{"prompt":"p","lastFrame":{"bytesBase64Encoded":"AAAA"}}]}`, string(got))
	plain := `{"instances":[{"image":{"bytesBase64Encoded":"iVBORw0K","mimeType":"image/png"}}]}`
	got, err = veo.RequestBody(json.RawMessage(plain))
	require.NoError(t, err)
	require.JSONEq(t, plain, string(got))
	for _, bad := range []string{"https://pollux.example/v1/inputs/x?sig=1", "data:image/png,raw"} {
		_, err = veo.RequestBody(json.RawMessage(`{"instances":[{"image":{"bytesBase64Encoded":"` + bad + `"}}]}`))
		var perr *provider.Error
		require.ErrorAs(t, err, &perr, bad)
		require.Equal(t, provider.Invalid, perr.Class, bad)
	}
}
