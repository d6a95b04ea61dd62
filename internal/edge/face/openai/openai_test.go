package openai_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/face/facetest"
	"github.com/pollux-dev/pollux/internal/edge/face/openai"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// made is the metadata of a video the face made (face.Kit.Job shows the
// face no other).
var made = map[string]string{face.MetaFace: string(face.OpenAI)}

type rig struct {
	p   *facetest.Pollux
	h   http.Handler
	now time.Time
}

// setup serves the face over an in-memory Pollux, both on a fixed clock.
func setup(t *testing.T) *rig {
	t.Helper()
	return setupWith(t, openai.New)
}

func setupWith(t *testing.T, build face.New) *rig {
	t.Helper()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return now }
	p := facetest.New()
	p.Clock(clock)
	f := build(face.Mount{Kind: face.OpenAI, Route: "sim", Now: clock, RecordGrace: 50 * time.Millisecond}, p)
	return &rig{p: p, h: f.Handler(), now: now}
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (r *rig) do(t *testing.T, req *http.Request) answer {
	t.Helper()
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, req)
	a := answer{status: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &a.body), a.raw)
	}
	return a
}

// part is one part of a multipart form; a file when filename is set.
type part struct{ name, filename, value string }

func form(t *testing.T, parts ...part) (*bytes.Buffer, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, p := range parts {
		var w io.Writer
		var err error
		if p.filename != "" {
			w, err = mw.CreateFormFile(p.name, p.filename)
		} else {
			w, err = mw.CreateFormField(p.name)
		}
		require.NoError(t, err)
		_, err = io.WriteString(w, p.value)
		require.NoError(t, err)
	}
	require.NoError(t, mw.Close())
	return &b, mw.FormDataContentType()
}

func (r *rig) create(t *testing.T, key string, parts ...part) answer {
	t.Helper()
	body, ct := form(t, parts...)
	req := httptest.NewRequest(http.MethodPost, "/v1/videos", body)
	req.Header.Set("Content-Type", ct)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return r.do(t, req)
}

func (r *rig) get(t *testing.T, path string) answer {
	t.Helper()
	return r.do(t, httptest.NewRequest(http.MethodGet, path, nil))
}

// errorOf is an OpenAI error body's error.
func errorOf(t *testing.T, a answer) map[string]any {
	t.Helper()
	e, ok := a.body["error"].(map[string]any)
	require.True(t, ok, "an OpenAI error: %s", a.raw)
	for _, k := range []string{"message", "type", "param", "code"} {
		require.Contains(t, e, k, "OpenAI's error has %s: %s", k, a.raw)
	}
	return e
}

// A create is one submission on the face's route — the model its model,
// the rest its input, what the video answers recorded in its metadata —
// answered as a video with an OpenAI id, and a retrieve answers it from
// the record.
func TestACreateIsASubmission(t *testing.T) {
	t.Parallel()
	r := setup(t)
	a := r.create(t, "", part{"prompt", "", "a cat on a skateboard"}, part{"model", "", "acme/video"}, part{"seconds", "", "8"}, part{"size", "", "1280x720"})
	require.Equal(t, http.StatusOK, a.status, a.raw)
	id, _ := a.body["id"].(string)
	require.Regexp(t, `^video_[0-9a-f]{32}$`, id)
	require.Equal(t, map[string]any{
		"id": id, "object": "video", "model": "acme/video", "status": "queued", "progress": 0.0,
		"created_at": float64(r.now.Unix()), "completed_at": nil, "expires_at": nil, "prompt": "a cat on a skateboard",
		"seconds": "8", "size": "1280x720", "remixed_from_video_id": nil, "error": nil,
	}, a.body)
	require.Len(t, r.p.Submissions(), 1)
	sub := r.p.Submissions()[0]
	require.Equal(t, id, sub.ID)
	require.Equal(t, "acme/video", sub.Model)
	require.JSONEq(t, `{"prompt": "a cat on a skateboard", "seconds": "8", "size": "1280x720"}`, string(sub.Input))
	require.Equal(t, "openai", sub.Metadata["face"])

	got := r.get(t, "/v1/videos/"+id)
	require.Equal(t, http.StatusOK, got.status, got.raw)
	require.Equal(t, a.body, got.body)

	// The defaults are OpenAI's.
	a = r.create(t, "", part{"prompt", "", "p"})
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, "sora-2", a.body["model"])
	require.Equal(t, "4", a.body["seconds"])
	require.Equal(t, "720x1280", a.body["size"])
}

// A create retried with its Idempotency-Key is the same video; without
// one, each create is a new one.
func TestAnIdempotencyKeyMakesOneVideo(t *testing.T) {
	t.Parallel()
	r := setup(t)
	one := r.create(t, "k1", part{"prompt", "", "p"})
	two := r.create(t, "k1", part{"prompt", "", "p"})
	require.Equal(t, one.body["id"], two.body["id"])
	require.Equal(t, "k1", r.p.Submissions()[0].IdempotencyKey)
	three := r.create(t, "", part{"prompt", "", "p"})
	four := r.create(t, "", part{"prompt", "", "p"})
	require.NotEqual(t, three.body["id"], four.body["id"])
	require.NotEqual(t, one.body["id"], three.body["id"])
	long := r.create(t, strings.Repeat("k", events.MaxKeyLen+1), part{"prompt", "", "p"})
	require.Equal(t, http.StatusBadRequest, long.status)
	require.Equal(t, "Idempotency-Key", errorOf(t, long)["param"])
}

// A create whose job has no record yet (ingest has not taken it) is
// answered queued from what was submitted, not as an error.
func TestACreateAheadOfItsRecordIsQueued(t *testing.T) {
	t.Parallel()
	r := setupWith(t, func(m face.Mount, p face.Pollux) face.Face { return openai.NewWaiting(m, p, 50*time.Millisecond) })
	r.p.Hold(true)
	a := r.create(t, "", part{"prompt", "", "p"})
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, "queued", a.body["status"])
	require.Equal(t, "p", a.body["prompt"])
}

// Every field a create may carry is checked, and a refusal names it.
func TestACreatesFieldsAreChecked(t *testing.T) {
	t.Parallel()
	r := setup(t)
	png := "\x89PNG\r\n\x1a\n" + strings.Repeat("x", 64)
	for _, c := range []struct {
		name  string
		parts []part
		param any
		code  string
	}{
		{"no prompt", []part{{"model", "", "m"}}, "prompt", "missing_required_parameter"},
		{"unknown", []part{{"prompt", "", "p"}, {"style", "", "noir"}}, "style", "unknown_parameter"},
		{"twice", []part{{"prompt", "", "p"}, {"prompt", "", "q"}}, "prompt", "duplicate_parameter"},
		{"seconds", []part{{"prompt", "", "p"}, {"seconds", "", "4.5"}}, "seconds", "invalid_value"},
		{"seconds range", []part{{"prompt", "", "p"}, {"seconds", "", "61"}}, "seconds", "invalid_value"},
		{"size", []part{{"prompt", "", "p"}, {"size", "", "big"}}, "size", "invalid_value"},
		{"prompt length", []part{{"prompt", "", strings.Repeat("p", 32<<10+1)}}, "prompt", "string_above_max_length"},
		{"model control", []part{{"prompt", "", "p"}, {"model", "", "a\nb"}}, "model", "invalid_value"},
		{"reference text", []part{{"prompt", "", "p"}, {"input_reference", "", "x"}}, "input_reference", "invalid_type"},
		{"reference large", []part{{"prompt", "", "p"}, {"input_reference", "a.png", png + strings.Repeat("x", 128<<10)}}, "input_reference", "file_too_large"},
		{"reference kind", []part{{"prompt", "", "p"}, {"input_reference", "a.txt", "hello"}}, "input_reference", "invalid_file_format"},
		{"reference url", []part{{"prompt", "", "p"}, {"input_reference[image_url]", "", "ftp://x/y"}}, "input_reference[image_url]", "invalid_url"},
		{"file id", []part{{"prompt", "", "p"}, {"input_reference[file_id]", "", "file_1"}}, "input_reference[file_id]", "unsupported_parameter"},
	} {
		a := r.create(t, "", c.parts...)
		require.Equal(t, http.StatusBadRequest, a.status, "%s: %s", c.name, a.raw)
		e := errorOf(t, a)
		require.Equal(t, "invalid_request_error", e["type"], c.name)
		require.Equal(t, c.param, e["param"], c.name)
		require.Equal(t, c.code, e["code"], c.name)
	}
	require.Empty(t, r.p.Submissions(), "nothing refused was submitted")

	// A small image travels as a data: URI; a URL as given.
	a := r.create(t, "", part{"prompt", "", "p"}, part{"input_reference", "a.png", png})
	require.Equal(t, http.StatusOK, a.status, a.raw)
	var in map[string]string
	require.NoError(t, json.Unmarshal(r.p.Submissions()[0].Input, &in))
	require.True(t, strings.HasPrefix(in["input_reference"], "data:image/png;base64,"), in["input_reference"])
	a = r.create(t, "", part{"prompt", "", "p"}, part{"input_reference[image_url]", "", "https://example.com/a.png"})
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.NoError(t, json.Unmarshal(r.p.Submissions()[1].Input, &in))
	require.Equal(t, "https://example.com/a.png", in["input_reference"])

	// Not a form; a body past the bound.
	req := httptest.NewRequest(http.MethodPost, "/v1/videos", strings.NewReader(`{"prompt":"p"}`))
	req.Header.Set("Content-Type", "application/json")
	a = r.do(t, req)
	require.Equal(t, http.StatusBadRequest, a.status)
	require.Equal(t, "invalid_content_type", errorOf(t, a)["code"])
	body, ct := form(t, part{"prompt", "", strings.Repeat("p", 32<<10)}, part{"size", "", strings.Repeat("1", 100<<10)}, part{"seconds", "", strings.Repeat("1", 100<<10)})
	req = httptest.NewRequest(http.MethodPost, "/v1/videos", body)
	req.Header.Set("Content-Type", ct)
	a = r.do(t, req)
	require.Equal(t, http.StatusBadRequest, a.status, "a field past its bound: %s", a.raw)
	require.Equal(t, "size", errorOf(t, a)["param"])
	// Bytes no field holds (a preamble before the first part) count too.
	body, ct = form(t, part{"prompt", "", "p"})
	req = httptest.NewRequest(http.MethodPost, "/v1/videos", io.MultiReader(strings.NewReader(strings.Repeat(strings.Repeat("x", 1000)+"\r\n", 200)), body))
	req.Header.Set("Content-Type", ct)
	a = r.do(t, req)
	require.Equal(t, http.StatusRequestEntityTooLarge, a.status, "the body is bounded: %s", a.raw)
	require.Equal(t, "body_too_large", errorOf(t, a)["code"])
}

// Pollux's states map onto OpenAI's four, a job that ended without a
// video failed with a code saying how.
func TestStatesMapToOpenAIs(t *testing.T) {
	t.Parallel()
	r := setup(t)
	half := 0.42
	end := r.now.Add(time.Minute)
	for _, c := range []struct {
		state    state.State
		status   string
		code     any
		progress float64
	}{
		{state.Pending, "queued", nil, 0},
		{state.Queued, "queued", nil, 0},
		{state.Running, "in_progress", nil, 42},
		{state.Succeeded, "completed", nil, 100},
		{state.Failed, "failed", "video_generation_failed", 42},
		{state.Canceled, "failed", "video_canceled", 42},
		{state.Expired, "failed", "video_expired", 42},
		{state.Lost, "failed", "video_lost", 42},
	} {
		j := &state.Job{ID: "video_" + string(c.state), Route: "sim", Metadata: made, State: c.state, CreatedAt: r.now, Progress: &half, Reason: "why", Model: "m"}
		if c.state.Terminal() {
			j.CompletedAt = end
		}
		r.p.Put(j)
		a := r.get(t, "/v1/videos/"+j.ID)
		require.Equal(t, http.StatusOK, a.status, a.raw)
		require.Equal(t, c.status, a.body["status"], c.state)
		require.Equal(t, c.progress, a.body["progress"], c.state)
		if c.code == nil {
			require.Nil(t, a.body["error"], c.state)
		} else {
			require.Equal(t, map[string]any{"code": c.code, "message": "why"}, a.body["error"], c.state)
		}
		if c.state.Terminal() {
			require.Equal(t, float64(end.Unix()), a.body["completed_at"])
		} else {
			require.Nil(t, a.body["completed_at"])
		}
	}
}

// openai-poll-after-ms is Pollux's own plan for the job, within bounds,
// and 0 once it has ended.
func TestPollAfterIsPolluxsPlan(t *testing.T) {
	t.Parallel()
	r := setup(t)
	for _, c := range []struct {
		next  time.Duration
		state state.State
		want  string
	}{
		{3 * time.Second, state.Running, "3000"},
		{-time.Second, state.Running, "1000"},
		{time.Hour, state.Queued, "10000"},
		{3 * time.Second, state.Succeeded, "0"},
	} {
		r.p.Put(&state.Job{ID: "video_p", Route: "sim", Metadata: made, State: c.state, CreatedAt: r.now, NextCheckAt: r.now.Add(c.next)})
		a := r.get(t, "/v1/videos/video_p")
		require.Equal(t, c.want, a.header.Get("openai-poll-after-ms"), "%+v", c)
	}
}

// Through an outage the hint is Pollux's plan, but at least
// face.OutagePollAfter: nothing changes before NATS is back.
func TestPollAfterThroughAnOutage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		next time.Duration
		want string
	}{
		{-time.Second, "5000"},
		{3 * time.Second, "5000"},
		{8 * time.Second, "8000"},
		{time.Hour, "10000"},
	} {
		r := setup(t)
		r.p.Put(&state.Job{ID: "video_p", Route: "sim", Metadata: made, State: state.Running, CreatedAt: r.now, NextCheckAt: r.now.Add(c.next)})
		r.p.Outage(true)
		a := r.get(t, "/v1/videos/video_p")
		require.Equal(t, http.StatusOK, a.status, a.raw)
		require.Equal(t, "in_progress", a.body["status"])
		require.Equal(t, c.want, a.header.Get("openai-poll-after-ms"), "%+v", c)
	}
}

// An unknown id, an unserved path and the front door's refusals are
// OpenAI's errors; a quota's wait is in both headers the SDK reads.
func TestErrorsAreOpenAIs(t *testing.T) {
	t.Parallel()
	r := setup(t)
	for _, path := range []string{"/v1/videos/video_00", "/v1/videos/nope", "/v1/videos/video_00/content"} {
		a := r.get(t, path)
		require.Equal(t, http.StatusNotFound, a.status, path)
		require.Equal(t, "video_not_found", errorOf(t, a)["code"], path)
	}
	a := r.get(t, "/v1/files")
	require.Equal(t, http.StatusNotFound, a.status)
	require.Equal(t, "unknown_url", errorOf(t, a)["code"])

	f := openai.New(face.Mount{Kind: face.OpenAI, Route: "sim"}, r.p)
	for _, c := range []struct {
		e          *face.Error
		code, typ  string
		retryAfter string
		retryMs    string
	}{
		{&face.Error{Status: 401, Code: "unauthorized"}, "invalid_api_key", "invalid_request_error", "", ""},
		{&face.Error{Status: 403, Code: "forbidden", Message: "read-only"}, "insufficient_permissions", "invalid_request_error", "", ""},
		{&face.Error{Status: 429, Code: "too_many_requests", RetryAfter: 1500 * time.Millisecond}, "rate_limit_exceeded", "requests", "2", "1500"},
		{&face.Error{Status: 503, Code: "unavailable", RetryAfter: time.Second}, "unavailable", "server_error", "1", "1000"},
	} {
		rec := httptest.NewRecorder()
		f.WriteError(rec, c.e)
		require.Equal(t, c.e.Status, rec.Code)
		var body struct{ Error map[string]any }
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		require.Equal(t, c.code, body.Error["code"], c.e.Code)
		require.Equal(t, c.typ, body.Error["type"], c.e.Code)
		require.NotEmpty(t, body.Error["message"])
		require.Equal(t, c.retryAfter, rec.Header().Get("Retry-After"), c.e.Code)
		require.Equal(t, c.retryMs, rec.Header().Get("Retry-After-Ms"), c.e.Code)
	}

	// A Pollux error the face does not know is a 503 the SDK retries.
	r.p.FailSubmit(facetest.ErrUnavailable)
	a = r.create(t, "", part{"prompt", "", "p"})
	require.Equal(t, http.StatusServiceUnavailable, a.status)
	require.Equal(t, "1", a.header.Get("Retry-After"))
}

// The content of a completed video is Pollux's to serve (here a
// redirect); other variants and unfinished videos are 404s.
func TestContent(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.p.Put(&state.Job{ID: "video_done", Route: "sim", Metadata: made, State: state.Succeeded, CreatedAt: r.now, Outputs: []string{"https://cdn.example/v.mp4"}})
	r.p.Put(&state.Job{ID: "video_run", Route: "sim", Metadata: made, State: state.Running, CreatedAt: r.now})
	r.p.Put(&state.Job{ID: "video_none", Route: "sim", Metadata: made, State: state.Succeeded, CreatedAt: r.now})
	a := r.get(t, "/v1/videos/video_done/content")
	require.Equal(t, http.StatusFound, a.status)
	require.Equal(t, "https://cdn.example/v.mp4", a.header.Get("Location"))
	a = r.get(t, "/v1/videos/video_done/content?variant=video")
	require.Equal(t, http.StatusFound, a.status)
	for path, code := range map[string]string{
		"/v1/videos/video_done/content?variant=thumbnail": "variant_not_found",
		"/v1/videos/video_run/content":                    "video_not_ready",
		"/v1/videos/video_none/content":                   "video_content_not_found",
	} {
		a = r.get(t, path)
		require.Equal(t, http.StatusNotFound, a.status, path)
		require.Equal(t, code, errorOf(t, a)["code"], path)
	}
	a = r.get(t, "/v1/videos/video_done/content?variant=gif")
	require.Equal(t, http.StatusBadRequest, a.status)
	require.Equal(t, "variant", errorOf(t, a)["param"])
}

// A delete cancels a video still being made; an ended one's record is
// kept (deleted: false), but for a canceled one.
func TestDeleteCancels(t *testing.T) {
	t.Parallel()
	r := setup(t)
	r.p.Put(&state.Job{ID: "video_run", Route: "sim", Metadata: made, State: state.Running, CreatedAt: r.now})
	r.p.Put(&state.Job{ID: "video_done", Route: "sim", Metadata: made, State: state.Succeeded, CreatedAt: r.now})
	r.p.Put(&state.Job{ID: "video_gone", Route: "sim", Metadata: made, State: state.Canceled, CreatedAt: r.now})
	del := func(id string) answer {
		return r.do(t, httptest.NewRequest(http.MethodDelete, "/v1/videos/"+id, nil))
	}
	a := del("video_run")
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, map[string]any{"id": "video_run", "object": "video.deleted", "deleted": true}, a.body)
	require.Equal(t, []string{"video_run"}, r.p.Cancels())
	require.Equal(t, false, del("video_done").body["deleted"])
	require.Equal(t, true, del("video_gone").body["deleted"])
	require.Equal(t, []string{"video_run"}, r.p.Cancels(), "an ended video is not canceled")
	require.Equal(t, http.StatusNotFound, del("video_nope").status)
}
