package genai_test

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
	"github.com/pollux-dev/pollux/internal/edge/face/genai"
	"github.com/pollux-dev/pollux/pkg/state"
)

const id = "abcdefghijklmnopqrstuvwxya" // 16 bytes in base32

var made = map[string]string{face.MetaFace: string(face.GenAI), "genai_model": "veo-3"}

// The face keeps what every face promises, through each API's poll.
func TestConformance(t *testing.T) {
	t.Parallel()
	facetest.Conformance(t, facetest.Harness{
		Kind: face.GenAI, New: genai.New, ID: id, Meta: map[string]string{"genai_model": "veo-3"}, Poll: "get", AlsoPoll: []string{"fetch"},
		Verbs: map[string]func(string) *http.Request{
			"get": func(id string) *http.Request {
				return httptest.NewRequest(http.MethodGet, "/v1beta/models/veo-3/operations/"+id, nil)
			},
			"fetch": func(id string) *http.Request {
				return httptest.NewRequest(http.MethodPost, "/v1beta1/publishers/google/models/veo-3:fetchPredictOperation",
					strings.NewReader(`{"operationName":"publishers/google/models/veo-3/operations/`+id+`"}`))
			},
			"download": func(id string) *http.Request {
				return httptest.NewRequest(http.MethodGet, "/v1beta/files/"+id+"0:download?alt=media", nil)
			},
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
	f := genai.New(face.Mount{Kind: face.GenAI, Route: "sim", Prefix: "/genai/sim", RecordGrace: 20 * time.Millisecond}, p)
	return &rig{p: p, h: f.Handler()}
}

func (r *rig) do(t *testing.T, method, path, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, req)
	var m map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &m), rec.Body.String())
	return rec.Code, rec.Header(), m
}

// A create is the body as the job's input, the path's model its model,
// answered with the operation of each API's name.
func TestCreate(t *testing.T) {
	t.Parallel()
	r := setup(t)
	body := `{"instances":[{"prompt":"a cat","image":{"bytesBase64Encoded":"iVBORw0K","mimeType":"image/png"}}],"parameters":{"durationSeconds":8}}`
	code, _, op := r.do(t, http.MethodPost, "/v1beta/models/veo-3.1-generate-preview:predictLongRunning", body)
	require.Equal(t, http.StatusOK, code, op)
	require.Regexp(t, `^models/veo-3.1-generate-preview/operations/[a-z2-7]{26}$`, op["name"])
	require.Nil(t, op["done"])
	subs := r.p.Submissions()
	require.Len(t, subs, 1)
	require.Equal(t, "veo-3.1-generate-preview", subs[0].Model)
	require.JSONEq(t, body, string(subs[0].Input))

	code, _, op = r.do(t, http.MethodPost, "/v1beta1/publishers/acme/models/video:predictLongRunning", `{"instances":[{"prompt":"p"}]}`)
	require.Equal(t, http.StatusOK, code, op)
	require.Regexp(t, `^publishers/acme/models/video/operations/[a-z2-7]{26}$`, op["name"])
	require.Equal(t, "acme/video", r.p.Submissions()[1].Model)
}

// A body the API would refuse is a 400 naming the field, and nothing is
// submitted.
func TestCreateRefusals(t *testing.T) {
	t.Parallel()
	r := setup(t)
	for body, field := range map[string]string{
		`{"instances":[{"prompt":"p"}],"config":{}}`: "config",
		`{"instances":[]}`:                           "instances",
		`{"instances":[{"negativePrompt":"x"}]}`:     "instances[0].prompt",
		`{"instances":[{"prompt":7}]}`:               "instances[0].prompt",
		`{"instances":[{"prompt":"p","image":{"bytesBase64Encoded":"%%%","mimeType":"image/png"}}]}`:   "instances[0].image.bytesBase64Encoded",
		`{"instances":[{"prompt":"p","image":{"bytesBase64Encoded":"AAAA","mimeType":"text/plain"}}]}`: "instances[0].image.mimeType",
		`{"instances":[{"prompt":"p","image":{}}]}`:                                                    "instances[0].image",
		`{"instances":[{"prompt":"p"}],"parameters":[]}`:                                               "parameters",
	} {
		code, _, e := r.do(t, http.MethodPost, "/v1beta/models/veo-3:predictLongRunning", body)
		require.Equal(t, http.StatusBadRequest, code, body)
		er := e["error"].(map[string]any)
		require.Equal(t, "INVALID_ARGUMENT", er["status"], body)
		require.Equal(t, 400.0, er["code"], body)
		v := er["details"].([]any)[0].(map[string]any)["fieldViolations"].([]any)[0].(map[string]any)
		require.Equal(t, field, v["field"], body)
	}
	for _, path := range []string{"/v1beta/models/a%20b:predictLongRunning", "/v1beta1/publishers/a%2Fb/models/veo:predictLongRunning"} {
		code, _, e := r.do(t, http.MethodPost, path, `{"instances":[{"prompt":"p"}]}`)
		require.Equal(t, http.StatusBadRequest, code, path)
		require.Equal(t, "model", e["error"].(map[string]any)["details"].([]any)[0].(map[string]any)["fieldViolations"].([]any)[0].(map[string]any)["field"], path)
	}
	require.Empty(t, r.p.Submissions())
}

// An operation is its job's record: not done until it ends, then its
// videos (each a file of the face) or Google's error.
func TestOperationFromRecord(t *testing.T) {
	t.Parallel()
	r := setup(t)
	put := func(s state.State, outputs ...string) {
		r.p.Put(&state.Job{ID: id, Route: "sim", Metadata: made, State: s, CreatedAt: time.Now(), Outputs: outputs, Reason: "why"})
	}
	put(state.Running)
	_, _, op := r.do(t, http.MethodGet, "/v1beta/models/veo-3/operations/"+id, "")
	require.Equal(t, map[string]any{"name": "models/veo-3/operations/" + id}, op)

	put(state.Succeeded, "https://cdn.example/v.mp4", "javascript:alert(1)")
	_, _, op = r.do(t, http.MethodGet, "/v1beta/models/veo-3/operations/"+id, "")
	require.Equal(t, true, op["done"])
	samples := op["response"].(map[string]any)["generateVideoResponse"].(map[string]any)["generatedSamples"].([]any)
	require.Len(t, samples, 1, "an unsafe output is not handed on")
	require.Equal(t, "http://example.com/genai/sim/v1beta/files/"+id+"0:download?alt=media", samples[0].(map[string]any)["video"].(map[string]any)["uri"])
	_, _, op = r.do(t, http.MethodPost, "/v1beta1/publishers/google/models/veo-3:fetchPredictOperation", `{"operationName":"publishers/google/models/veo-3/operations/`+id+`"}`)
	require.Equal(t, "publishers/google/models/veo-3/operations/"+id, op["name"])
	require.Equal(t, "http://example.com/genai/sim/v1beta1/files/"+id+"0:download?alt=media", op["response"].(map[string]any)["videos"].([]any)[0].(map[string]any)["gcsUri"])

	req := httptest.NewRequest(http.MethodGet, "/v1beta/files/"+id+"0:download?alt=media", nil)
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code, "the SDK downloads with the app's key: the bytes through Pollux, never a redirect that carries it")
	require.Empty(t, rec.Header().Get("Location"))
	require.Equal(t, "proxied https://cdn.example/v.mp4", rec.Body.String())
	code, _, _ := r.do(t, http.MethodGet, "/v1beta/files/"+id+"1:download?alt=media", "")
	require.Equal(t, http.StatusNotFound, code)

	for s, c := range map[state.State]float64{state.Failed: 13, state.Canceled: 1, state.Expired: 4, state.Lost: 2} {
		put(s)
		_, _, op = r.do(t, http.MethodGet, "/v1beta/models/veo-3/operations/"+id, "")
		require.Equal(t, true, op["done"], s)
		require.Equal(t, map[string]any{"code": c, "message": "why"}, op["error"], s)
	}
}

// The front door's refusals are Google's errors.
func TestErrorsAreGoogles(t *testing.T) {
	t.Parallel()
	f := genai.New(face.Mount{Kind: face.GenAI, Route: "sim"}, facetest.New())
	for status, want := range map[int]string{401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"} {
		rec := httptest.NewRecorder()
		f.WriteError(rec, &face.Error{Status: status, Code: "x", Message: "m", RetryAfter: time.Second})
		require.Equal(t, status, rec.Code)
		var b struct{ Error map[string]any }
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &b))
		require.Equal(t, want, b.Error["status"])
		require.Equal(t, float64(status), b.Error["code"])
		require.Equal(t, "1", rec.Header().Get("Retry-After"))
	}
}

// BenchmarkGet is the face's own cost of an operations.get over an
// in-memory Pollux: what every SDK poll costs the front door besides
// reading the record.
func BenchmarkGet(b *testing.B) {
	p := facetest.New()
	p.Put(&state.Job{ID: id, Route: "sim", Model: "acme/video", State: state.Succeeded, CreatedAt: time.Now(),
		Outputs: []string{"https://cdn.example/out.mp4"}, Metadata: made})
	h := genai.New(face.Mount{Kind: face.GenAI, Route: "sim", Prefix: "/genai/sim"}, p).Handler()
	req := httptest.NewRequest(http.MethodGet, "/v1beta/models/veo-3/operations/"+id, nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}
