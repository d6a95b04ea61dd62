package replicate_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/face/facetest"
	"github.com/pollux-dev/pollux/internal/edge/face/replicate"
	"github.com/pollux-dev/pollux/pkg/state"
)

// prediction is the part of a prediction the tests read.
type prediction struct {
	ID          string          `json:"id"`
	Model       string          `json:"model"`
	Version     string          `json:"version"`
	Input       json.RawMessage `json:"input"`
	Logs        string          `json:"logs"`
	Output      any             `json:"output"`
	Error       *string         `json:"error"`
	Status      string          `json:"status"`
	CreatedAt   string          `json:"created_at"`
	StartedAt   *string         `json:"started_at"`
	CompletedAt *string         `json:"completed_at"`
	DataRemoved *bool           `json:"data_removed"`
	URLs        map[string]string
	Metrics     map[string]float64
}

func decode(t *testing.T, body string) prediction {
	t.Helper()
	var p prediction
	require.NoError(t, json.Unmarshal([]byte(body), &p), body)
	return p
}

var replicateID = regexp.MustCompile(`^[a-z2-7]{26}$`)

// A create is a submission on the route, answered as a prediction with a
// Replicate-style id; a get answers it from the record.
func TestACreateIsAPredictionOfTheRoute(t *testing.T) {
	t.Parallel()
	p, srv := setup(t)
	resp, body := do(t, srv, http.MethodPost, "/v1/models/acme/video/predictions", `{"input":{"prompt":"a cat"}}`, nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	got := decode(t, body)
	require.Regexp(t, replicateID, got.ID)
	require.Equal(t, "starting", got.Status)
	require.Equal(t, "acme/video", got.Model)
	require.JSONEq(t, `{"prompt":"a cat"}`, string(got.Input))
	require.Equal(t, srv.URL+"/replicate/sim/v1/predictions/"+got.ID, got.URLs["get"])
	require.Equal(t, srv.URL+"/replicate/sim/v1/predictions/"+got.ID+"/cancel", got.URLs["cancel"])
	require.NotContains(t, got.URLs, "stream", "Pollux streams nothing: the SDK's stream() must say so")
	require.NotNil(t, got.DataRemoved)

	subs := p.Submissions()
	require.Len(t, subs, 1)
	require.Equal(t, got.ID, subs[0].ID)
	require.Equal(t, "acme/video", subs[0].Model)
	require.Equal(t, "replicate", subs[0].Metadata["face"])

	version := strings.Repeat("ab", 32)
	resp, body = do(t, srv, http.MethodPost, "/v1/predictions", `{"version":"`+version+`","input":{"n":1}}`, nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	v := decode(t, body)
	require.Equal(t, version, v.Version)
	require.Equal(t, version, p.Submissions()[1].Model, "a version create runs the version")

	p.Update(got.ID, func(j *state.Job) {
		j.State, j.StartedAt = state.Running, time.Now()
		pr := 0.42
		j.Progress = &pr
	})
	resp, body = do(t, srv, http.MethodGet, "/v1/predictions/"+got.ID, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	g := decode(t, body)
	require.Equal(t, "processing", g.Status, "a get says processing; only a create's answer says starting")
	require.NotNil(t, g.StartedAt)
	// The SDK's parseProgressFromLogs.
	require.Regexp(t, `(?m)^\s*(\d+)%\s*\|.+?\|\s*(\d+)/(\d+)`, g.Logs)
	require.Contains(t, g.Logs, "42%")
}

// Every Pollux state maps to a status the SDK's wait() ends on or polls
// on; never "aborted", which it polls forever.
func TestStatuses(t *testing.T) {
	t.Parallel()
	p, srv := setup(t)
	for _, tc := range []struct {
		state  state.State
		status string
		failed bool
	}{
		{state.Pending, "starting", false},
		{state.Queued, "starting", false},
		{state.Running, "processing", false},
		{state.Succeeded, "succeeded", false},
		{state.Failed, "failed", true},
		{state.Expired, "failed", true},
		{state.Lost, "failed", true},
		{state.Canceled, "canceled", false},
	} {
		now := time.Now()
		j := &state.Job{ID: "s-" + string(tc.state), Route: route, Model: "m", State: tc.state, Reason: "why", CreatedAt: now.Add(-3 * time.Second),
			StartedAt: now.Add(-2 * time.Second), Outputs: []string{"https://cdn.example/out.mp4"}, Metadata: made}
		if tc.state.Terminal() {
			j.CompletedAt = now
		}
		p.Put(j)
		_, body := do(t, srv, http.MethodGet, "/v1/predictions/"+j.ID, "", nil)
		got := decode(t, body)
		require.Equal(t, tc.status, got.Status, tc.state)
		require.Equal(t, tc.failed, got.Error != nil, "%s: error %v", tc.state, got.Error)
		if tc.failed {
			require.Contains(t, *got.Error, "why")
		}
		if tc.state == state.Succeeded {
			require.Equal(t, "https://cdn.example/out.mp4", got.Output, "one output: a string")
			require.InDelta(t, 2, got.Metrics["predict_time"], 0.01)
			require.InDelta(t, 3, got.Metrics["total_time"], 0.01)
		} else {
			require.Nil(t, got.Output, tc.state)
		}
		require.Equal(t, tc.state.Terminal(), got.CompletedAt != nil, tc.state)
	}
	p.Put(&state.Job{ID: "two", Route: route, State: state.Succeeded, Outputs: []string{"https://a/1", "https://a/2"}, Metadata: made})
	_, body := do(t, srv, http.MethodGet, "/v1/predictions/two", "", nil)
	require.Equal(t, []any{"https://a/1", "https://a/2"}, decode(t, body).Output, "several outputs: an array")
}

// Prefer: wait holds the create until the job ends; a wait that ends
// first answers "starting", so the SDK's run() polls instead of
// returning a null output.
func TestPreferWait(t *testing.T) {
	t.Parallel()
	p, srv := setup(t)
	type answer struct {
		code int
		body string
	}
	got := make(chan answer, 1)
	go func() {
		resp, body := do(t, srv, http.MethodPost, "/v1/models/acme/video/predictions", `{"input":{}}`, map[string]string{"Prefer": "wait", "Idempotency-Key": "held"})
		got <- answer{resp.StatusCode, body}
	}()
	require.Eventually(t, func() bool { return len(p.Submissions()) == 1 }, 10*time.Second, 5*time.Millisecond)
	id := p.Submissions()[0].ID
	p.Update(id, func(j *state.Job) { j.State = state.Running })
	select {
	case a := <-got:
		t.Fatalf("answered before the job ended: %s", a.body)
	case <-time.After(200 * time.Millisecond):
	}
	p.Update(id, func(j *state.Job) {
		j.State, j.Outputs, j.CompletedAt = state.Succeeded, []string{"https://cdn.example/v.mp4"}, time.Now()
	})
	select {
	case a := <-got:
		require.Equal(t, http.StatusCreated, a.code, a.body)
		w := decode(t, a.body)
		require.Equal(t, "succeeded", w.Status)
		require.Equal(t, "https://cdn.example/v.mp4", w.Output)
	case <-time.After(20 * time.Second):
		t.Fatal("the held create was not answered when the job ended")
	}

	// wait=1 on a running job: answered when the second passes, as starting.
	resp, body := do(t, srv, http.MethodPost, "/v1/models/acme/video/predictions", `{"input":{}}`, map[string]string{"Idempotency-Key": "short"})
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	short := decode(t, body)
	p.Update(short.ID, func(j *state.Job) { j.State = state.Running })
	resp, body = do(t, srv, http.MethodPost, "/v1/models/acme/video/predictions", `{"input":{}}`, map[string]string{"Prefer": "wait=1", "Idempotency-Key": "short"})
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	require.Equal(t, short.ID, decode(t, body).ID, "one key, one prediction")
	require.Equal(t, "starting", decode(t, body).Status, "an unfinished job answers a create as starting")
}

// A create answers once the job's record exists, so the SDK's first get
// finds the prediction.
func TestACreateWaitsForTheRecord(t *testing.T) {
	t.Parallel()
	p, srv := setup(t)
	p.Hold(true)
	got := make(chan string, 1)
	go func() {
		_, body := do(t, srv, http.MethodPost, "/v1/models/acme/video/predictions", `{"input":{}}`, nil)
		got <- body
	}()
	require.Eventually(t, func() bool { return len(p.Submissions()) == 1 }, 10*time.Second, 5*time.Millisecond)
	select {
	case b := <-got:
		t.Fatalf("answered before the record existed: %s", b)
	case <-time.After(200 * time.Millisecond):
	}
	m := p.Submissions()[0]
	p.Put(&state.Job{ID: m.ID, Route: route, Model: m.Model, State: state.Queued, CreatedAt: time.Now(), Metadata: m.Metadata})
	select {
	case b := <-got:
		require.Equal(t, m.ID, decode(t, b).ID)
	case <-time.After(20 * time.Second):
		t.Fatal("not answered once the record existed")
	}
	resp, _ := do(t, srv, http.MethodGet, "/v1/predictions/"+m.ID, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// A create whose record is late (its gateway died holding the
// submission) is answered from the create, and so is a get of it until
// the record exists: the SDK polling it meets no 404.
func TestARecordThatIsLate(t *testing.T) {
	t.Parallel()
	p, srv := setupWith(t, func(m face.Mount, p face.Pollux) face.Face { return replicate.NewWaiting(m, p, 50*time.Millisecond) })
	p.Hold(true)
	resp, body := do(t, srv, http.MethodPost, "/v1/models/acme/video/predictions", `{"input":{"prompt":"late"}}`, nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	created := decode(t, body)
	require.Equal(t, "starting", created.Status)
	resp, body = do(t, srv, http.MethodGet, "/v1/predictions/"+created.ID, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "starting", decode(t, body).Status)
	require.JSONEq(t, `{"prompt":"late"}`, string(decode(t, body).Input))
	resp, body = do(t, srv, http.MethodPost, "/v1/predictions/"+created.ID+"/cancel", "", nil)
	requireProblem(t, resp, body, http.StatusConflict, "")
	require.Equal(t, "1", resp.Header.Get("Retry-After"))

	p.Put(&state.Job{ID: created.ID, Route: route, State: state.Running, CreatedAt: time.Now(), Metadata: made})
	_, body = do(t, srv, http.MethodGet, "/v1/predictions/"+created.ID, "", nil)
	require.Equal(t, "processing", decode(t, body).Status, "the record, once it exists")
}

// A get of a prediction another gateway answered before ingest took it
// waits a moment for its record instead of a 404 the SDK would throw.
func TestAGetWaitsForAnotherGatewaysCreate(t *testing.T) {
	t.Parallel()
	p, srv := setupWith(t, func(m face.Mount, p face.Pollux) face.Face {
		m.RecordGrace = time.Minute
		return replicate.New(m, p)
	})
	const id = "abcdefghijklmnopqrstuvwxyz"
	got := make(chan int, 1)
	go func() {
		resp, _ := do(t, srv, http.MethodGet, "/v1/predictions/"+id, "", nil)
		got <- resp.StatusCode
	}()
	select {
	case w := <-p.Waits():
		require.Equal(t, id, w)
	case status := <-got:
		t.Fatalf("answered %d without waiting for the record", status)
	}
	p.Put(&state.Job{ID: id, Route: route, State: state.Queued, CreatedAt: time.Now(), Metadata: made})
	select {
	case status := <-got:
		require.Equal(t, http.StatusOK, status)
	case <-time.After(20 * time.Second):
		t.Fatal("the record came and the get did not answer it")
	}
}

// An Idempotency-Key makes a retried create one prediction; without one
// each create is its own.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	p, srv := setup(t)
	create := func(h map[string]string) string {
		resp, body := do(t, srv, http.MethodPost, "/v1/models/acme/video/predictions", `{"input":{}}`, h)
		require.Equal(t, http.StatusCreated, resp.StatusCode, body)
		return decode(t, body).ID
	}
	one, two := create(map[string]string{"Idempotency-Key": "k"}), create(map[string]string{"Idempotency-Key": "k"})
	require.Equal(t, one, two)
	require.Equal(t, "k", p.Submissions()[0].IdempotencyKey)
	require.NotEqual(t, create(nil), create(nil))
	resp, body := do(t, srv, http.MethodPost, "/v1/models/acme/video/predictions", `{"input":{}}`, map[string]string{"Idempotency-Key": strings.Repeat("k", 300)})
	requireProblem(t, resp, body, http.StatusBadRequest, "Idempotency-Key")
}

// A cancel asks Pollux and answers the prediction once it has ended (or
// as it is, when it had); an unknown or foreign one is 404.
func TestCancel(t *testing.T) {
	t.Parallel()
	p, srv := setup(t)
	p.CancelEnds(true)
	p.Put(&state.Job{ID: "c1", Route: route, State: state.Running, Metadata: made})
	resp, body := do(t, srv, http.MethodPost, "/v1/predictions/c1/cancel", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "canceled", decode(t, body).Status)
	require.Equal(t, []string{"c1"}, p.Cancels())

	p.Put(&state.Job{ID: "c2", Route: route, State: state.Succeeded, Metadata: made})
	resp, body = do(t, srv, http.MethodPost, "/v1/predictions/c2/cancel", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "succeeded", decode(t, body).Status)

	resp, body = do(t, srv, http.MethodPost, "/v1/predictions/nope/cancel", "", nil)
	requireProblem(t, resp, body, http.StatusNotFound, "")
	p.Put(&state.Job{ID: "other", Route: "elsewhere", State: state.Running, Metadata: made})
	resp, body = do(t, srv, http.MethodPost, "/v1/predictions/other/cancel", "", nil)
	requireProblem(t, resp, body, http.StatusNotFound, "")
	require.Equal(t, []string{"c1"}, p.Cancels(), "no cancel of another route's job")
}

// A model route's job is the face's: it was routed through the route.
func TestAModelRoutesJobIsTheFaces(t *testing.T) {
	t.Parallel()
	p, srv := setup(t)
	p.Put(&state.Job{ID: "routed", Route: "member", Routing: &state.Routing{Via: route}, State: state.Queued, Metadata: made})
	resp, body := do(t, srv, http.MethodGet, "/v1/predictions/routed", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
}

// Bad requests are answered in Replicate's problem shape, naming the
// field at fault.
func TestBadRequests(t *testing.T) {
	t.Parallel()
	p, srv := setup(t)
	for _, tc := range []struct {
		name, path, body string
		h                map[string]string
		status           int
		field            string
	}{
		{"unknown id", "/v1/predictions/nope", "", nil, 404, ""},
		{"not JSON", "/v1/predictions", `{"version":`, nil, 400, ""},
		{"not an object", "/v1/predictions", `[1]`, nil, 400, ""},
		{"no version", "/v1/predictions", `{"input":{}}`, nil, 422, "version"},
		{"version not a string", "/v1/predictions", `{"version":5,"input":{}}`, nil, 422, "version"},
		{"no input", "/v1/models/acme/video/predictions", `{}`, nil, 422, "input"},
		{"input not an object", "/v1/models/acme/video/predictions", `{"input":"cat"}`, nil, 422, "input"},
		{"webhook", "/v1/models/acme/video/predictions", `{"input":{},"webhook":"https://app.example/hook"}`, nil, 422, "webhook"},
		{"long version", "/v1/predictions", `{"version":"` + strings.Repeat("v", 300) + `","input":{}}`, nil, 422, "version"},
		{"bad model", "/v1/models/acme/v%20v/predictions", `{"input":{}}`, nil, 404, ""},
		{"bad Prefer", "/v1/models/acme/video/predictions", `{"input":{}}`, map[string]string{"Prefer": "wait=soon"}, 400, "Prefer"},
		{"zero Prefer", "/v1/models/acme/video/predictions", `{"input":{}}`, map[string]string{"Prefer": "wait=0"}, 400, "Prefer"},
		{"not JSON content", "/v1/models/acme/video/predictions", `{"input":{}}`, map[string]string{"Content-Type": "text/plain"}, 415, "Content-Type"},
		{"too large", "/v1/models/acme/video/predictions", `{"input":{"x":"` + strings.Repeat("x", face.MaxDataBody) + `"}}`, nil, 413, ""},
		{"deployments", "/v1/deployments/acme/video/predictions", `{"input":{}}`, nil, 404, ""},
		{"trainings", "/v1/trainings", "", nil, 404, ""},
	} {
		method := http.MethodPost
		if tc.body == "" {
			method = http.MethodGet
		}
		resp, body := do(t, srv, method, tc.path, tc.body, tc.h)
		requireProblem(t, resp, body, tc.status, tc.field)
	}
	require.Empty(t, p.Submissions(), "nothing refused was submitted")

	p.FailSubmit(facetest.ErrUnavailable)
	resp, body := do(t, srv, http.MethodPost, "/v1/models/acme/video/predictions", `{"input":{}}`, nil)
	requireProblem(t, resp, body, http.StatusServiceUnavailable, "")
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
}

// The front door's refusals reach the SDK as Replicate's: a quota's 429
// with its Retry-After.
func TestWriteError(t *testing.T) {
	t.Parallel()
	f := replicate.New(face.Mount{Kind: face.Replicate, Route: route}, facetest.New())
	for _, e := range []*face.Error{
		{Status: 401, Code: "unauthorized", Message: "a token is required"},
		{Status: 403, Code: "forbidden", Message: "this token may only read"},
		{Status: 429, Code: "too_many_requests", Message: "slow down", RetryAfter: 1500 * time.Millisecond},
	} {
		w := httptest.NewRecorder()
		f.WriteError(w, e)
		require.Equal(t, e.Status, w.Code)
		require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
		var got map[string]any
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
		require.Equal(t, float64(e.Status), got["status"])
		require.Equal(t, e.Message, got["detail"])
		require.NotEmpty(t, got["title"])
		if e.RetryAfter > 0 {
			require.Equal(t, "2", w.Header().Get("Retry-After"), "whole seconds, rounded up")
		}
	}
}

func requireProblem(t *testing.T, resp *answer, body string, status int, field string) {
	t.Helper()
	require.Equal(t, status, resp.StatusCode, body)
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), body)
	var p struct {
		Title         string `json:"title"`
		Detail        string `json:"detail"`
		Status        int    `json:"status"`
		InvalidFields []struct {
			Field string `json:"field"`
		} `json:"invalid_fields"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &p), body)
	require.Equal(t, status, p.Status, body)
	require.NotEmpty(t, p.Detail, body)
	if field == "" {
		require.Empty(t, p.InvalidFields, body)
		return
	}
	require.Len(t, p.InvalidFields, 1, body)
	require.Equal(t, field, p.InvalidFields[0].Field, body)
}
