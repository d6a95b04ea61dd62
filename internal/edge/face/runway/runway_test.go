package runway_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/face/facetest"
	"github.com/pollux-dev/pollux/internal/edge/face/runway"
	"github.com/pollux-dev/pollux/pkg/state"
)

const id = "0123abcd-0123-4567-89ab-0123456789ab"

var made = map[string]string{face.MetaFace: string(face.Runway)}

func request(method, path, body string) *http.Request {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("X-Runway-Version", runway.Version)
	return r
}

// The face keeps what every face promises.
func TestConformance(t *testing.T) {
	t.Parallel()
	facetest.Conformance(t, facetest.Harness{
		Kind: face.Runway, New: runway.New, ID: id, Poll: "retrieve",
		Verbs: map[string]func(string) *http.Request{
			"retrieve": func(id string) *http.Request { return request(http.MethodGet, "/v1/tasks/"+id, "") },
			"delete":   func(id string) *http.Request { return request(http.MethodDelete, "/v1/tasks/"+id, "") },
		},
	})
}

type rig struct {
	p *facetest.Pollux
	h http.Handler
}

func setup(t *testing.T) *rig {
	t.Helper()
	p := facetest.New()
	return &rig{p: p, h: runway.New(face.Mount{Kind: face.Runway, Route: "sim", Prefix: "/runway/sim", RecordGrace: 20 * time.Millisecond}, p).Handler()}
}

func (r *rig) do(t *testing.T, req *http.Request) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, req)
	var m map[string]any
	if rec.Body.Len() > 0 {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &m), rec.Body.String())
	}
	return rec.Code, m
}

// X-Runway-Version is checked on every request, as Runway does.
func TestVersionIsChecked(t *testing.T) {
	t.Parallel()
	r := setup(t)
	for _, v := range []string{"", "2023-01-01"} {
		req := request(http.MethodGet, "/v1/tasks/"+id, "")
		req.Header.Set("X-Runway-Version", v)
		code, body := r.do(t, req)
		require.Equal(t, http.StatusBadRequest, code, v)
		require.Equal(t, []any{"X-Runway-Version"}, body["issues"].([]any)[0].(map[string]any)["path"], v)
	}
}

// A create submits endpoint:model with the body as input, answered {id};
// a create without a model or to an endpoint Runway has not is refused.
func TestCreate(t *testing.T) {
	t.Parallel()
	r := setup(t)
	body := `{"model":"gen4_turbo","promptImage":"https://example.com/a.png","promptText":"p","ratio":"1280:720","duration":5}`
	code, got := r.do(t, request(http.MethodPost, "/v1/image_to_video", body))
	require.Equal(t, http.StatusOK, code, got)
	require.True(t, face.IsUUID(got["id"].(string)), got)
	s := r.p.Submissions()[0]
	require.Equal(t, "image_to_video:gen4_turbo", s.Model)
	require.JSONEq(t, body, string(s.Input))

	code, got = r.do(t, request(http.MethodPost, "/v1/text_to_video", `{"promptText":"p"}`))
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, []any{"model"}, got["issues"].([]any)[0].(map[string]any)["path"])
	code, _ = r.do(t, request(http.MethodPost, "/v1/text_to_image", `{"model":"m"}`))
	require.Equal(t, http.StatusNotFound, code)
	require.Len(t, r.p.Submissions(), 1)
}

// A task is its job's record in Runway's statuses.
func TestTaskFromRecord(t *testing.T) {
	t.Parallel()
	r := setup(t)
	half := 0.5
	for _, c := range []struct {
		s          state.State
		provider   string
		status     string
		progress   any
		code, fail any
	}{
		{state.Pending, "", "PENDING", nil, nil, nil},
		{state.Queued, "THROTTLED", "THROTTLED", nil, nil, nil},
		{state.Running, "", "RUNNING", 0.5, nil, nil},
		{state.Canceled, "", "CANCELLED", nil, nil, nil},
		{state.Failed, "", "FAILED", nil, "INTERNAL", "why"},
		{state.Expired, "", "FAILED", nil, "INTERNAL.TIMEOUT", "why"},
		{state.Lost, "", "FAILED", nil, "INTERNAL.LOST", "why"},
	} {
		r.p.Put(&state.Job{ID: id, Route: "sim", Metadata: made, State: c.s, ProviderStatus: c.provider, Progress: &half, Reason: "why", CreatedAt: time.Now()})
		code, got := r.do(t, request(http.MethodGet, "/v1/tasks/"+id, ""))
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, c.status, got["status"], c.s)
		require.Equal(t, c.progress, got["progress"], c.s)
		require.Equal(t, c.code, got["failureCode"], c.s)
		require.Equal(t, c.fail, got["failure"], c.s)
	}
	r.p.Put(&state.Job{ID: id, Route: "sim", Metadata: made, State: state.Succeeded, CreatedAt: time.Now(), Outputs: []string{"https://cdn.example/v.mp4"}})
	_, got := r.do(t, request(http.MethodGet, "/v1/tasks/"+id, ""))
	require.Equal(t, []any{"https://cdn.example/v.mp4"}, got["output"])
}

// A delete cancels a task under way; of an ended task it changes nothing.
func TestDeleteCancels(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.p.Put(&state.Job{ID: id, Route: "sim", Metadata: made, State: state.Running, CreatedAt: time.Now()})
	code, _ := r.do(t, request(http.MethodDelete, "/v1/tasks/"+id, ""))
	require.Equal(t, http.StatusNoContent, code)
	require.Equal(t, []string{id}, r.p.Cancels())
	r.p.Put(&state.Job{ID: id, Route: "sim", Metadata: made, State: state.Succeeded, CreatedAt: time.Now()})
	code, _ = r.do(t, request(http.MethodDelete, "/v1/tasks/"+id, ""))
	require.Equal(t, http.StatusNoContent, code)
	require.Len(t, r.p.Cancels(), 1)
}

// BenchmarkGet is the face's own cost of a retrieve over an in-memory
// Pollux: what every SDK poll costs the front door besides reading the
// record.
func BenchmarkGet(b *testing.B) {
	p := facetest.New()
	p.Put(&state.Job{ID: id, Route: "sim", Model: "acme/video", State: state.Succeeded, CreatedAt: time.Now(),
		Outputs: []string{"https://cdn.example/out.mp4"}, Metadata: made})
	h := runway.New(face.Mount{Kind: face.Runway, Route: "sim", Prefix: "/runway/sim"}, p).Handler()
	req := request(http.MethodGet, "/v1/tasks/"+id, "")
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}

// An input file is an https URL or a data: URI: a URL Pollux's rules
// refuse (http beyond loopback, a private address, credentials) or
// anything else is a 400 naming the field, and nothing is submitted.
func TestInputsAreChecked(t *testing.T) {
	t.Parallel()
	r := setup(t)
	for body, path := range map[string][]any{
		`{"model":"m","promptImage":"http://example.com/a.png"}`:                                             {"promptImage"},
		`{"model":"m","promptImage":"https://10.0.0.1/a.png"}`:                                               {"promptImage"},
		`{"model":"m","promptImage":"https://u:p@example.com/a.png"}`:                                        {"promptImage"},
		`{"model":"m","promptImage":"file:///etc/passwd"}`:                                                   {"promptImage"},
		`{"model":"m","promptImage":"data:image/png,not-base64"}`:                                            {"promptImage"},
		`{"model":"m","promptImage":7}`:                                                                      {"promptImage"},
		`{"model":"m","promptImage":[{"position":"first"}]}`:                                                 {"promptImage", "0", "uri"},
		`{"model":"m","promptImage":[{"uri":"https://x.example/a","position":"first"},{"uri":"ftp://x/b"}]}`: {"promptImage", "1", "uri"},
		`{"model":"m","videoUri":"https://169.254.169.254/latest"}`:                                          {"videoUri"},
	} {
		code, got := r.do(t, request(http.MethodPost, "/v1/image_to_video", body))
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Equal(t, path, got["issues"].([]any)[0].(map[string]any)["path"], body)
	}
	require.Empty(t, r.p.Submissions())
	body := `{"model":"m","promptImage":[{"uri":"https://x.example/a.png","position":"first"},{"uri":"data:image/png;base64,iVBORw0K","position":"last"}]}`
	code, got := r.do(t, request(http.MethodPost, "/v1/image_to_video", body))
	require.Equal(t, http.StatusOK, code, got)
	require.JSONEq(t, body, string(r.p.Submissions()[0].Input), "a small data: URI stays inline; a URL passes as it is")
}
