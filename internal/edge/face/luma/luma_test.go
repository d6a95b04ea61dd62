package luma_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/face/facetest"
	"github.com/pollux-dev/pollux/internal/edge/face/luma"
	"github.com/pollux-dev/pollux/pkg/state"
)

const id = "0123abcd-0123-4567-89ab-0123456789ab"

var made = map[string]string{face.MetaFace: string(face.Luma), "luma_model": "ray-2", "luma_type": "video"}

// The face keeps what every face promises.
func TestConformance(t *testing.T) {
	t.Parallel()
	facetest.Conformance(t, facetest.Harness{
		Kind: face.Luma, New: luma.New, ID: id, Meta: map[string]string{"luma_model": "ray-2", "luma_type": "video"}, Poll: "get",
		Verbs: map[string]func(string) *http.Request{
			"get":    func(id string) *http.Request { return httptest.NewRequest(http.MethodGet, "/generations/"+id, nil) },
			"delete": func(id string) *http.Request { return httptest.NewRequest(http.MethodDelete, "/generations/"+id, nil) },
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
	return &rig{p: p, h: luma.New(face.Mount{Kind: face.Luma, Route: "sim", Prefix: "/luma/sim", RecordGrace: 20 * time.Millisecond}, p).Handler()}
}

func (r *rig) do(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	var m map[string]any
	if rec.Body.Len() > 0 {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &m), rec.Body.String())
	}
	return rec.Code, m
}

// A create submits the body with its model, answered with the queued
// generation; a body Luma would refuse is a 422 naming the field.
func TestCreate(t *testing.T) {
	t.Parallel()
	r := setup(t)
	body := `{"model":"ray-2","prompt":"a lake","aspect_ratio":"16:9"}`
	code, g := r.do(t, http.MethodPost, "/generations/video", body)
	require.Equal(t, http.StatusCreated, code, g)
	require.True(t, face.IsUUID(g["id"].(string)))
	require.Equal(t, "queued", g["state"])
	require.Equal(t, "video", g["generation_type"])
	require.Equal(t, "ray-2", g["model"])
	require.Equal(t, "ray-2", r.p.Submissions()[0].Model)
	require.JSONEq(t, body, string(r.p.Submissions()[0].Input))

	for body, field := range map[string]string{
		`{"prompt":"p"}`:               "model",
		`{"model":"ray-2"}`:            "prompt",
		`{"model":"ray-2","prompt":7}`: "prompt",
		`{"model":"ray-2","prompt":"p","callback_url":"https://x"}`: "callback_url",
	} {
		code, e := r.do(t, http.MethodPost, "/generations/video", body)
		require.Equal(t, http.StatusUnprocessableEntity, code, body)
		require.Equal(t, []any{"body", field}, e["detail"].([]any)[0].(map[string]any)["loc"], body)
	}
	require.Len(t, r.p.Submissions(), 1)
}

// A generation is its job's record in Luma's states.
func TestGenerationFromRecord(t *testing.T) {
	t.Parallel()
	r := setup(t)
	for s, want := range map[state.State]string{state.Pending: "queued", state.Queued: "queued", state.Running: "dreaming",
		state.Failed: "failed", state.Canceled: "failed", state.Expired: "failed", state.Lost: "failed"} {
		r.p.Put(&state.Job{ID: id, Route: "sim", Metadata: made, State: s, Reason: "why", CreatedAt: time.Now()})
		_, g := r.do(t, http.MethodGet, "/generations/"+id, "")
		require.Equal(t, want, g["state"], s)
		if want == "failed" {
			require.Equal(t, "why", g["failure_reason"], s)
		}
	}
	r.p.Put(&state.Job{ID: id, Route: "sim", Metadata: made, State: state.Succeeded, CreatedAt: time.Now(), Outputs: []string{"https://cdn.example/v.mp4"}})
	_, g := r.do(t, http.MethodGet, "/generations/"+id, "")
	require.Equal(t, "completed", g["state"])
	require.Equal(t, map[string]any{"video": "https://cdn.example/v.mp4"}, g["assets"])
}

// The list is the face's generations, newest first, limit after offset.
func TestListOffsets(t *testing.T) {
	t.Parallel()
	r := setup(t)
	now := time.Now()
	for i := range 7 {
		r.p.Put(&state.Job{ID: fmt.Sprintf("0123abcd-0123-4567-89ab-0123456789%02d", i), Route: "sim", Metadata: made, State: state.Running, CreatedAt: now.Add(time.Duration(i) * time.Second)})
	}
	ids := func(g map[string]any) []string {
		var out []string
		for _, x := range g["generations"].([]any) {
			out = append(out, x.(map[string]any)["id"].(string)[34:])
		}
		return out
	}
	_, g := r.do(t, http.MethodGet, "/generations?limit=3", "")
	require.Equal(t, []string{"06", "05", "04"}, ids(g))
	require.Equal(t, true, g["has_more"])
	_, g = r.do(t, http.MethodGet, "/generations?limit=3&offset=4", "")
	require.Equal(t, []string{"02", "01", "00"}, ids(g))
	require.Equal(t, false, g["has_more"])
	require.Equal(t, 3.0, g["count"])
	code, _ := r.do(t, http.MethodGet, "/generations?offset=-1", "")
	require.Equal(t, http.StatusUnprocessableEntity, code)
}

// A delete cancels a generation under way; of an ended one it changes
// nothing.
func TestDeleteCancels(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.p.Put(&state.Job{ID: id, Route: "sim", Metadata: made, State: state.Running, CreatedAt: time.Now()})
	code, _ := r.do(t, http.MethodDelete, "/generations/"+id, "")
	require.Equal(t, http.StatusNoContent, code)
	require.Equal(t, []string{id}, r.p.Cancels())
	code, e := r.do(t, http.MethodDelete, "/generations/0123abcd-0123-4567-89ab-0123456789ff", "")
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, "Generation not found", e["detail"])
}

// BenchmarkGet is the face's own cost of a get over an in-memory Pollux:
// what every SDK poll costs the front door besides reading the record.
func BenchmarkGet(b *testing.B) {
	p := facetest.New()
	p.Put(&state.Job{ID: id, Route: "sim", Model: "acme/video", State: state.Succeeded, CreatedAt: time.Now(),
		Input:   json.RawMessage(`{"model":"ray-2","prompt":"a lake at sunset","aspect_ratio":"16:9"}`),
		Outputs: []string{"https://cdn.example/out.mp4"}, Metadata: made})
	h := luma.New(face.Mount{Kind: face.Luma, Route: "sim", Prefix: "/luma/sim"}, p).Handler()
	req := httptest.NewRequest(http.MethodGet, "/generations/"+id, nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}

// Keyframes are frame0 and frame1, each an image by https URL or data:
// URI, or a generation by id: anything else is a 422 naming the field,
// and nothing is submitted.
func TestKeyframesAreChecked(t *testing.T) {
	t.Parallel()
	r := setup(t)
	for frames, field := range map[string]string{
		`[]`: "keyframes",
		`{"frame2":{"type":"image","url":"https://x.example/a.png"}}`: "keyframes.frame2",
		`{"frame0":{"url":"https://x.example/a.png"}}`:                "keyframes.frame0",
		`{"frame0":{"type":"image"}}`:                                 "keyframes.frame0.url",
		`{"frame0":{"type":"image","url":"http://x.example/a.png"}}`:  "keyframes.frame0.url",
		`{"frame0":{"type":"image","url":"https://127.0.0.1/a.png"}}`: "keyframes.frame0.url",
		`{"frame1":{"type":"image","url":"javascript:alert(1)"}}`:     "keyframes.frame1.url",
		`{"frame0":{"type":"generation","id":"nope"}}`:                "keyframes.frame0.id",
		`{"frame0":{"type":"video","url":"https://x.example/a.mp4"}}`: "keyframes.frame0.type",
	} {
		body := `{"model":"ray-2","keyframes":` + frames + `}`
		code, e := r.do(t, http.MethodPost, "/generations/video", body)
		require.Equal(t, http.StatusUnprocessableEntity, code, body)
		require.Equal(t, []any{"body", field}, e["detail"].([]any)[0].(map[string]any)["loc"], body)
	}
	require.Empty(t, r.p.Submissions())
	body := `{"model":"ray-2","keyframes":{"frame0":{"type":"image","url":"https://x.example/a.png"},"frame1":{"type":"generation","id":"00000000-0000-4000-8000-000000000000"}}}`
	code, g := r.do(t, http.MethodPost, "/generations/video", body)
	require.Equal(t, http.StatusCreated, code, g)
	require.JSONEq(t, body, string(r.p.Submissions()[0].Input))
}

// A create's callback_url becomes the job's own webhook (its notify_url),
// with the face's URL in its metadata for the callbacks' generation;
// refused, naming the field, when this Pollux calls no apps' URLs or the
// URL is one it would not call.
func TestCallbackURL(t *testing.T) {
	t.Parallel()
	r := setup(t)
	body := `{"model":"ray-2","prompt":"p","callback_url":"https://app.example/luma?secret=s3"}`
	code, e := r.do(t, http.MethodPost, "/generations/video", body)
	require.Equal(t, http.StatusUnprocessableEntity, code, "no notify.submissions: %v", e)
	require.Equal(t, []any{"body", "callback_url"}, e["detail"].([]any)[0].(map[string]any)["loc"])

	r.p.SetWebhooks(&face.Webhooks{})
	for _, url := range []string{`""`, `"http://app.example/x"`, `"https://10.1.2.3/x"`, `"https://127.0.0.1/x"`} {
		code, e := r.do(t, http.MethodPost, "/generations/video", `{"model":"ray-2","prompt":"p","callback_url":`+url+`}`)
		require.Equal(t, http.StatusUnprocessableEntity, code, url)
		require.Equal(t, []any{"body", "callback_url"}, e["detail"].([]any)[0].(map[string]any)["loc"], url)
	}
	require.Empty(t, r.p.Submissions())
	code, g := r.do(t, http.MethodPost, "/generations/video", body)
	require.Equal(t, http.StatusCreated, code, g)
	s := r.p.Submissions()[0]
	require.Equal(t, "https://app.example/luma?secret=s3", s.NotifyURL)
	require.Equal(t, "http://example.com/luma/sim", s.Metadata["luma_base"])
}
