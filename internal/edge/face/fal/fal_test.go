package fal

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
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

var v4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// A submit is a Pollux submission of the endpoint id with the body as
// input, answered in fal's shape with URLs built from owner/app alone, as
// the client builds them.
func TestASubmitIsAPolluxSubmission(t *testing.T) {
	t.Parallel()
	f, p := setup(t)
	r := call(t, f, http.MethodPost, queue+"acme/video/turbo", `{"prompt":"a fox"}`)
	require.Equal(t, http.StatusOK, r.status, r.raw)
	id := r.body["request_id"].(string)
	require.Regexp(t, v4, id)
	require.Equal(t, id, r.header.Get(requestIDHeader))
	base := "https://queue.fal.run/acme/video/requests/" + id
	require.Equal(t, base, r.body["response_url"])
	require.Equal(t, base+"/status", r.body["status_url"])
	require.Equal(t, base+"/cancel", r.body["cancel_url"])
	require.Equal(t, "IN_QUEUE", r.body["status"])
	require.InDelta(t, 0, r.body["queue_position"], 0)

	subs := p.Submissions()
	require.Len(t, subs, 1)
	require.Equal(t, id, subs[0].ID)
	require.Equal(t, "acme/video/turbo", subs[0].Model, "the model is the endpoint id, path and all")
	require.JSONEq(t, `{"prompt":"a fox"}`, string(subs[0].Input))
	require.Equal(t, map[string]string{face.MetaFace: "fal", MetaApp: "acme/video"}, subs[0].Metadata)

	// A namespaced endpoint's app is namespace/owner/app; a URL endpoint
	// id comes with a trailing slash.
	r = call(t, f, http.MethodPost, queue+"workflows/acme/flow/", `{}`)
	require.Equal(t, http.StatusOK, r.status, r.raw)
	require.True(t, strings.HasPrefix(r.body["status_url"].(string), "https://queue.fal.run/workflows/acme/flow/requests/"), r.raw)
	require.Equal(t, "workflows/acme/flow", p.Submissions()[1].Model)
}

// An Idempotency-Key makes a retried submit one job; without one each
// submit is a new job.
func TestAnIdempotencyKeyMakesOneRequest(t *testing.T) {
	t.Parallel()
	f, p := setup(t)
	one := submit(t, f, "acme/video", `{}`, "Idempotency-Key", "k-1")
	two := submit(t, f, "acme/video", `{}`, "Idempotency-Key", "k-1")
	require.Equal(t, one, two)
	require.Equal(t, "k-1", p.Submissions()[0].IdempotencyKey)
	require.NotEqual(t, one, submit(t, f, "acme/video", `{}`))
	require.NotEqual(t, submit(t, f, "acme/video", `{}`), submit(t, f, "acme/video", `{}`))

	r := call(t, f, http.MethodPost, queue+"acme/video", `{}`, "Idempotency-Key", strings.Repeat("k", events.MaxKeyLen+1))
	require.Equal(t, http.StatusUnprocessableEntity, r.status, r.raw)
	require.Equal(t, []any{"header", "Idempotency-Key"}, r.body["detail"].([]any)[0].(map[string]any)["loc"])
}

// A submit's body is a JSON object, bounded; anything else is refused
// naming it, and nothing is submitted.
func TestASubmitsBodyIsChecked(t *testing.T) {
	t.Parallel()
	f, p := setup(t)
	for _, body := range []string{`{"prompt":`, `["a"]`, `"a fox"`, `null`} {
		r := call(t, f, http.MethodPost, queue+"acme/video", body)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s: %s", body, r.raw)
		require.Equal(t, []any{map[string]any{"loc": []any{"body"}, "msg": "the input must be a JSON object", "type": "value_error"}}, r.body["detail"])
	}
	r := call(t, f, http.MethodPost, queue+"acme/video", `{"p":"`+strings.Repeat("x", face.MaxDataBody)+`"}`)
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status, r.raw)
	r = call(t, f, http.MethodPost, queue+"acme/video", `{}`, "Content-Type", "text/plain")
	require.Equal(t, http.StatusUnsupportedMediaType, r.status, r.raw)
	r = call(t, f, http.MethodPost, queue+"acme/video?fal_webhook=https%3A%2F%2Fapp.example%2Fhook", `{}`)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, r.raw)
	require.Contains(t, r.raw, `"loc":["query","fal_webhook"]`)
	require.Empty(t, p.Submissions())

	submit(t, f, "acme/video", "")
	require.JSONEq(t, `{}`, string(p.Submissions()[0].Input), "no body is an empty input")
}

// Pollux is no proxy: only https://queue.fal.run/ with plain path
// segments is a target; anything else is refused before anything is
// submitted or read.
func TestOnlyFalsQueueIsATarget(t *testing.T) {
	t.Parallel()
	f, p := setup(t)
	for _, target := range []string{
		"http://queue.fal.run/acme/video",
		"https://fal.run/acme/video",
		"https://rest.alpha.fal.ai/storage/upload/complete",
		"https://rest.fal.ai/tokens/",
		"https://other.fal.run/acme/video",
		"https://evilfal.run/acme/video",
		"https://queue.fal.run.evil.example/acme/video",
		"https://QUEUE.FAL.RUN/acme/video",
		"https://queue.fal.run./acme/video",
		"https://queue.fal.run:443/acme/video",
		"https://queue.fal.run:8443/acme/video",
		"https://user:pw@queue.fal.run/acme/video",
		"https://queue.fal.run@evil.example/acme/video",
		"https://127.0.0.1/acme/video",
		"https://[::1]/acme/video",
		"https://169.254.169.254/latest/meta-data",
		"https://queue.fal.run/acme/%2e%2e/video",
		"https://queue.fal.run/acme%2Fvideo",
		"https://queue.fal.run/acme/../video",
		"https://queue.fal.run/acme/./video",
		"https://queue.fal.run/acme//video",
		"https://queue.fal.run/acme\\video",
		"https://queue.fal.run/acme/video#x",
		"https://queue.fal.run/acme/vidéo",
		"https://queue.fal.run/acme/vi deo",
		"https://queue.fal.run/acme",
		"https://queue.fal.run/",
		"https:queue.fal.run/acme/video",
		"//queue.fal.run/acme/video",
		"queue.fal.run/acme/video",
		"file:///etc/passwd",
		"https://queue.fal.run/" + strings.Repeat("a/", 20) + "b",
	} {
		r := call(t, f, http.MethodPost, target, `{}`)
		require.Contains(t, []int{http.StatusPreconditionFailed, http.StatusBadRequest}, r.status, "%s: %s", target, r.raw)
		require.Contains(t, r.body["detail"], TargetHeader, target)
	}
	r := call(t, f, http.MethodPost, "", `{}`)
	require.Equal(t, http.StatusBadRequest, r.status, r.raw)
	require.Contains(t, r.body["detail"], "missing the x-fal-target-url header")
	require.Empty(t, p.Submissions())
}

// FuzzTarget: whatever is accepted names fal's queue with a path of plain
// segments.
func FuzzTarget(f *testing.F) {
	for _, s := range []string{queue + "acme/video", queue + "acme/video/requests/x/status?logs=1", "https://fal.run/a/b", "http://x/%2e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodPut} {
			tg, e := parseTarget(raw, m)
			if e != nil {
				continue
			}
			require.True(t, strings.HasPrefix(raw, queue), raw)
			for _, s := range strings.Split(tg.app+"/"+tg.endpoint+"/"+tg.id, "/") {
				require.True(t, s == "" || segmentRe.MatchString(s), raw)
			}
		}
	})
}

// Each target takes its method.
func TestTargetsTakeTheirMethod(t *testing.T) {
	t.Parallel()
	f, _ := setup(t)
	r := call(t, f, http.MethodGet, queue+"acme/video", "")
	require.Equal(t, http.StatusMethodNotAllowed, r.status, r.raw)
	require.Equal(t, "POST", r.header.Get("Allow"))
	r = call(t, f, http.MethodPost, queue+"acme/video/requests/"+uuid(make([]byte, 16))+"/status", "")
	require.Equal(t, http.StatusMethodNotAllowed, r.status, r.raw)
	r = call(t, f, http.MethodGet, queue+"acme/video/requests/"+uuid(make([]byte, 16))+"/cancel", "")
	require.Equal(t, http.StatusMethodNotAllowed, r.status, r.raw)
	r = call(t, f, http.MethodPost, queue+"acme/video/requests/"+uuid(make([]byte, 16))+"/status/stream", "")
	require.Equal(t, http.StatusMethodNotAllowed, r.status, r.raw)
	r = call(t, f, http.MethodGet, queue+"acme/video/requests/"+uuid(make([]byte, 16))+"/status/stream", "")
	require.Equal(t, http.StatusNotFound, r.status, "an unknown request: %s", r.raw)
}

// A status stream sends the request's status at once, then each change
// of it, and ends after COMPLETED.
func TestAStatusStreamFollowsTheJobToItsEnd(t *testing.T) {
	t.Parallel()
	f, p := setup(t)
	id := submit(t, f, "acme/video", `{"prompt":"a fox"}`)
	for len(p.Waits()) > 0 {
		<-p.Waits() // the create's
	}
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil)
		req.Header.Set(TargetHeader, requestURL(id, "/status/stream"))
		rec := httptest.NewRecorder()
		f.Handler().ServeHTTP(rec, req)
		done <- rec
	}()
	select {
	case <-p.Waits(): // the stream sent the first status and waits for a change
	case <-time.After(10 * time.Second):
		t.Fatal("the stream never waited for a change")
	}
	p.Update(id, func(j *state.Job) { j.State = state.Running })
	p.Update(id, func(j *state.Job) {
		j.State, j.Outputs = state.Succeeded, []string{"https://cdn.example/v.mp4"}
	})
	rec := <-done
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "text/event-stream", rec.Header().Get("Content-Type"))
	var statuses []string
	for _, ev := range strings.Split(strings.TrimSpace(rec.Body.String()), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		require.True(t, ok, "%q", ev)
		var s struct{ Status string }
		require.NoError(t, json.Unmarshal([]byte(data), &s))
		statuses = append(statuses, s.Status)
	}
	require.Equal(t, "IN_QUEUE", statuses[0])
	require.Equal(t, "COMPLETED", statuses[len(statuses)-1], "%v", statuses)
}

func requestURL(id, suffix string) string { return queue + "acme/video/requests/" + id + suffix }

// The status is answered from the record, in fal's vocabulary: an ended
// job is COMPLETED whatever its outcome (the client polls until then),
// with its error when it did not succeed.
func TestStatusIsTheRecordInFalsWords(t *testing.T) {
	t.Parallel()
	f, p := setup(t)
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	three := 3
	for _, c := range []struct {
		job     state.Job
		code    int
		status  string
		pos     any
		err     string
		errType string
	}{
		{state.Job{State: state.Pending}, 202, "IN_QUEUE", 0.0, "", ""},
		{state.Job{State: state.Queued, QueuePosition: &three}, 202, "IN_QUEUE", 2.0, "", ""},
		{state.Job{State: state.Running}, 202, "IN_PROGRESS", nil, "", ""},
		{state.Job{State: state.Succeeded, StartedAt: started, CompletedAt: started.Add(1500 * time.Millisecond)}, 200, "COMPLETED", nil, "", ""},
		{state.Job{State: state.Failed, RemoteID: "r", Reason: "boom"}, 200, "COMPLETED", nil, "boom", "runner_server_error"},
		{state.Job{State: state.Canceled}, 200, "COMPLETED", nil, "the request was canceled", "client_cancelled"},
		{state.Job{State: state.Expired}, 200, "COMPLETED", nil, "the request timed out", "request_timeout"},
		{state.Job{State: state.Lost}, 200, "COMPLETED", nil, "the request was lost", "internal_error"},
	} {
		id := submit(t, f, "acme/video", `{}`)
		j, err := p.Job(t.Context(), id)
		require.NoError(t, err)
		c.job.ID, c.job.Route, c.job.Metadata = id, j.Route, j.Metadata
		p.Put(&c.job)
		r := call(t, f, http.MethodGet, requestURL(id, "/status?logs=0"), "")
		require.Equal(t, c.code, r.status, r.raw)
		require.Equal(t, c.status, r.body["status"], r.raw)
		require.Equal(t, c.pos, r.body["queue_position"], r.raw)
		require.Equal(t, requestURL(id, ""), r.body["response_url"])
		require.Nil(t, r.body["logs"], "logs=0: no logs")
		if c.err != "" {
			require.Equal(t, c.err, r.body["error"], r.raw)
			require.Equal(t, c.errType, r.body["error_type"], r.raw)
		} else {
			require.NotContains(t, r.body, "error")
		}
		if c.job.State == state.Succeeded {
			require.Equal(t, map[string]any{"inference_time": 1.5}, r.body["metrics"])
		}
	}

	id := submit(t, f, "acme/video", `{}`)
	j, _ := p.Job(t.Context(), id)
	j.WaitingFor = "route paused: rate_limit"
	p.Put(j)
	r := call(t, f, http.MethodGet, requestURL(id, "/status?logs=1"), "")
	require.Equal(t, "waiting: route paused: rate_limit", r.body["logs"].([]any)[0].(map[string]any)["message"], r.raw)
}

// The result is a succeeded job's outputs as fal's File objects, or the
// error of a job that ended otherwise, in a status the client does not
// retry; a job under way has no result yet.
func TestResultIsTheOutputOrTheError(t *testing.T) {
	t.Parallel()
	f, p := setup(t)
	end := func(j state.Job) string {
		id := submit(t, f, "acme/video", `{}`)
		rec, err := p.Job(t.Context(), id)
		require.NoError(t, err)
		j.ID, j.Route, j.Metadata = id, rec.Route, rec.Metadata
		p.Put(&j)
		return id
	}
	id := end(state.Job{State: state.Succeeded, Outputs: []string{"https://cdn.example/a/out.mp4", "https://cdn.example/a/frame.PNG", "https://cdn.example/a/b.bin"}})
	r := call(t, f, http.MethodGet, requestURL(id, ""), "")
	require.Equal(t, http.StatusOK, r.status, r.raw)
	require.Equal(t, id, r.header.Get(requestIDHeader), "the client reads the request id from the header")
	require.JSONEq(t, `{
		"video": {"url": "https://cdn.example/a/out.mp4", "content_type": "video/mp4", "file_name": "out.mp4"},
		"images": [{"url": "https://cdn.example/a/frame.PNG", "content_type": "image/png", "file_name": "frame.PNG"}],
		"files": [
			{"url": "https://cdn.example/a/out.mp4", "content_type": "video/mp4", "file_name": "out.mp4"},
			{"url": "https://cdn.example/a/frame.PNG", "content_type": "image/png", "file_name": "frame.PNG"},
			{"url": "https://cdn.example/a/b.bin", "file_name": "b.bin"}]}`, r.raw)

	for _, c := range []struct {
		job     state.Job
		code    int
		errType string
	}{
		{state.Job{State: state.Failed, RemoteID: "r", Reason: "boom"}, 500, "runner_server_error"},
		{state.Job{State: state.Canceled, Reason: "by app"}, 499, "client_cancelled"},
		{state.Job{State: state.Expired}, 504, "request_timeout"},
		{state.Job{State: state.Lost}, 500, "internal_error"},
	} {
		r := call(t, f, http.MethodGet, requestURL(end(c.job), ""), "")
		require.Equal(t, c.code, r.status, r.raw)
		require.Equal(t, c.errType, r.body["error_type"], r.raw)
		require.Equal(t, c.errType, r.header.Get("X-Fal-Error-Type"))
		require.NotEmpty(t, r.body["detail"])
	}
	r = call(t, f, http.MethodGet, requestURL(end(state.Job{State: state.Expired}), ""), "")
	require.Equal(t, "user", r.header.Get("X-Fal-Request-Timeout-Type"), "a 504 the client does not retry")

	r = call(t, f, http.MethodGet, requestURL(end(state.Job{State: state.Failed, Reason: "model: not owner/name"}), ""), "")
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "refused before the provider had it: a validation error")
	require.Equal(t, []any{map[string]any{"loc": []any{"body"}, "msg": "model: not owner/name", "type": "value_error"}}, r.body["detail"])

	r = call(t, f, http.MethodGet, requestURL(end(state.Job{State: state.Running}), ""), "")
	require.Equal(t, http.StatusBadRequest, r.status, r.raw)
	require.Contains(t, r.body["detail"], "IN_PROGRESS")
}

// A request id is served only for a request of this face, route and app;
// one not recorded yet is waited for a moment (a status racing its
// submit), then 404.
func TestUnknownRequestsAreNotFound(t *testing.T) {
	t.Parallel()
	f, p := setup(t)
	for _, id := range []string{"nope", strings.ToUpper(uuid(make([]byte, 16))), uuid([]byte("0123456789abcdef"))} {
		r := call(t, f, http.MethodGet, requestURL(id, "/status"), "")
		require.Equal(t, http.StatusNotFound, r.status, r.raw)
		require.Contains(t, r.body["detail"], "no request")
	}
	foreign := uuid([]byte("fedcba9876543210"))
	p.Put(&state.Job{ID: foreign, Route: route, State: state.Running})
	require.Equal(t, http.StatusNotFound, call(t, f, http.MethodGet, requestURL(foreign, "/status"), "").status, "not a fal request")
	other := submit(t, f, "acme/video", `{}`)
	j, _ := p.Job(t.Context(), other)
	j.Route = "elsewhere"
	p.Put(j)
	require.Equal(t, http.StatusNotFound, call(t, f, http.MethodGet, requestURL(other, "/status"), "").status, "another route's")
	mine := submit(t, f, "acme/video", `{}`)
	require.Equal(t, http.StatusNotFound, call(t, f, http.MethodGet, queue+"acme/image/requests/"+mine+"/status", "").status, "another app's")
	require.Equal(t, http.StatusAccepted, call(t, f, http.MethodGet, requestURL(mine, "/status"), "").status)
	j, _ = p.Job(t.Context(), mine)
	j.Routing = &state.Routing{Via: route}
	j.Route = "member"
	p.Put(j)
	require.Equal(t, http.StatusAccepted, call(t, f, http.MethodGet, requestURL(mine, "/status"), "").status, "through the model route")

	// The record comes while the status waits for it.
	f = New(face.Mount{Kind: face.Fal, Route: route, Prefix: face.Prefix(face.Fal, route), RecordGrace: time.Minute}, p).(*Face)
	p.Hold(true)
	late := submit(t, f, "acme/video", `{}`)
	got := make(chan reply, 1)
	go func() { got <- call(t, f, http.MethodGet, requestURL(late, "/status"), "") }()
	for waiting := ""; waiting != late; {
		select {
		case waiting = <-p.Waits():
		case <-time.After(30 * time.Second):
			t.Fatal("the status did not wait for the record")
		}
	}
	sub := p.Submissions()[len(p.Submissions())-1]
	p.Put(&state.Job{ID: late, Route: route, State: state.Pending, Metadata: sub.Metadata})
	select {
	case r := <-got:
		require.Equal(t, http.StatusAccepted, r.status, r.raw)
	case <-time.After(30 * time.Second):
		t.Fatal("the status did not see the record")
	}
}

// A cancel asks Pollux; one of an ended job is fal's ALREADY_COMPLETED,
// one of an unknown id NOT_FOUND.
func TestCancel(t *testing.T) {
	t.Parallel()
	f, p := setup(t)
	id := submit(t, f, "acme/video", `{}`)
	r := call(t, f, http.MethodPut, requestURL(id, "/cancel"), "")
	require.Equal(t, http.StatusAccepted, r.status, r.raw)
	require.Equal(t, "CANCELLATION_REQUESTED", r.body["status"])
	require.Equal(t, []string{id}, p.Cancels())

	j, _ := p.Job(t.Context(), id)
	j.State = state.Canceled
	p.Put(j)
	r = call(t, f, http.MethodPut, requestURL(id, "/cancel"), "")
	require.Equal(t, http.StatusBadRequest, r.status, r.raw)
	require.Equal(t, "ALREADY_COMPLETED", r.body["status"])
	require.Len(t, p.Cancels(), 1)

	r = call(t, f, http.MethodPut, requestURL(uuid(make([]byte, 16)), "/cancel"), "")
	require.Equal(t, http.StatusNotFound, r.status, r.raw)
	require.Equal(t, "NOT_FOUND", r.body["status"])
}

// The front door's refusals and Pollux's errors reach the client in fal's
// shape: a field at fault is a 422 naming it, a quota's 429 and an
// outage's 503 carry Retry-After.
func TestErrorsAreFalShaped(t *testing.T) {
	t.Parallel()
	f, p := setup(t)
	for _, c := range []struct {
		e     *face.Error
		code  int
		retry string
	}{
		{&face.Error{Status: 401, Code: "unauthorized", Message: "bad token"}, 401, ""},
		{&face.Error{Status: 403, Code: "forbidden", Message: "read-only", Field: "Pollux-CSRF"}, 403, ""},
		{&face.Error{Status: 429, Code: "too_many_requests", Message: "slow down", RetryAfter: 1500 * time.Millisecond}, 429, "2"},
		{&face.Error{Status: 503, Code: "unavailable", Message: "later", RetryAfter: time.Second}, 503, "1"},
	} {
		p.FailSubmit(c.e)
		r := call(t, f, http.MethodPost, queue+"acme/video", `{}`)
		require.Equal(t, c.code, r.status, r.raw)
		require.Equal(t, c.e.Message, r.body["detail"], r.raw)
		require.Equal(t, c.e.Message, r.body["message"], "the client's error message")
		require.Equal(t, c.retry, r.header.Get("Retry-After"))
	}
	p.FailSubmit(&face.Error{Status: 400, Code: "invalid_field", Field: "metadata", Message: "metadata: too many"})
	r := call(t, f, http.MethodPost, queue+"acme/video", `{}`)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, r.raw)
	require.Equal(t, []any{"body", "metadata"}, r.body["detail"].([]any)[0].(map[string]any)["loc"])
	p.FailSubmit(&events.FieldError{Field: "model", Problem: "too long"})
	r = call(t, f, http.MethodPost, queue+"acme/video", `{}`)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, r.raw)
	require.Equal(t, []any{"url", TargetHeader}, r.body["detail"].([]any)[0].(map[string]any)["loc"])
	p.FailSubmit(facetest.ErrUnavailable)
	r = call(t, f, http.MethodPost, queue+"acme/video", `{}`)
	require.Equal(t, http.StatusServiceUnavailable, r.status, r.raw)
	require.Equal(t, "1", r.header.Get("Retry-After"))

	// The proxy is the mount's "/" alone.
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/x", nil)
	req.Header.Set(TargetHeader, requestURL(uuid(make([]byte, 16)), "/status"))
	rec := httptest.NewRecorder()
	f.Handler().ServeHTTP(rec, req)
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Contains(t, rec.Body.String(), "/fal/sim/")
}

// A result links an output the route keeps to the face — the kept bytes,
// or the provider's until custody has copied them — with its name and
// type from the provider's URL or what custody kept; any other output to
// the provider's URL when it is safe, and an unsafe one not at all.
func TestResultLinksKeptOutputs(t *testing.T) {
	t.Parallel()
	f, p := setup(t)
	p.KeepOutputs(route)
	end := func(j state.Job) string {
		id := submit(t, f, "acme/video", `{}`)
		rec, err := p.Job(t.Context(), id)
		require.NoError(t, err)
		j.ID, j.Route, j.Metadata, j.State = id, rec.Route, rec.Metadata, state.Succeeded
		p.Put(&j)
		return id
	}
	kept := end(state.Job{Outputs: []string{"https://cdn.example/v", "https://cdn.example/gone.png"},
		Custody: &state.Custody{SavedAt: time.Now(), Outputs: []state.SavedOutput{
			{Index: 0, Status: state.OutputSaved, Object: "o/0", ContentType: "video/mp4"}, {Index: 1, Status: state.OutputGone}}}})
	r := call(t, f, http.MethodGet, requestURL(kept, ""), "")
	require.Equal(t, http.StatusOK, r.status, r.raw)
	self := "http://example.com/fal/sim/outputs/" + kept + "/0"
	require.JSONEq(t, `{
		"video": {"url": "`+self+`", "content_type": "video/mp4", "file_name": "v"},
		"images": [{"url": "https://cdn.example/gone.png", "content_type": "image/png", "file_name": "gone.png"}],
		"files": [
			{"url": "`+self+`", "content_type": "video/mp4", "file_name": "v"},
			{"url": "https://cdn.example/gone.png", "content_type": "image/png", "file_name": "gone.png"}]}`, r.raw)
	rec := httptest.NewRecorder()
	f.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/outputs/"+kept+"/0", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "kept o/0", rec.Body.String())

	copying := end(state.Job{Outputs: []string{"https://cdn.example/c.mp4"}})
	r = call(t, f, http.MethodGet, requestURL(copying, ""), "")
	require.Equal(t, "http://example.com/fal/sim/outputs/"+copying+"/0", r.body["video"].(map[string]any)["url"], r.raw)
	rec = httptest.NewRecorder()
	f.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/outputs/"+copying+"/0", nil))
	require.Equal(t, http.StatusFound, rec.Code, "the provider's until custody has copied it")
	require.Equal(t, "https://cdn.example/c.mp4", rec.Header().Get("Location"))

	f, p = setup(t) // a route that keeps no outputs
	unsafe := end(state.Job{Outputs: []string{"javascript:alert(1)", "https://cdn.example/ok.mp4"}})
	r = call(t, f, http.MethodGet, requestURL(unsafe, ""), "")
	require.JSONEq(t, `{"video": {"url": "https://cdn.example/ok.mp4", "content_type": "video/mp4", "file_name": "ok.mp4"},
		"files": [{"url": "https://cdn.example/ok.mp4", "content_type": "video/mp4", "file_name": "ok.mp4"}]}`, r.raw)
}
