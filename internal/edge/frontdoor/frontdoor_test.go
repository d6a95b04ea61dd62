package frontdoor_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

func TestSubmit(t *testing.T) {
	t.Parallel()
	d := setup(t, frontdoor.Config{})
	const msg = `"v":1,"model":"owner/model","input":{"prompt":"<b>&\u2028</b>","n":1}`
	tests := []struct {
		name   string
		body   string
		header map[string]string
		wantID func(id string) bool
		key    string // the published idempotency_key
	}{
		{"explicit id", `{"route":"sim","id":"job-1",` + msg + `}`, nil,
			func(id string) bool { return id == "job-1" }, ""},
		{"body key", `{"route":"sim","idempotency_key":"order-1",` + msg + `}`, nil,
			func(id string) bool { return id == events.KeyID(route, "order-1") }, "order-1"},
		{"header key", `{"route":"sim",` + msg + `}`, map[string]string{"Idempotency-Key": "order-2"},
			func(id string) bool { return id == events.KeyID(route, "order-2") }, "order-2"},
		{"same key twice", `{"route":"sim","idempotency_key":"order-3",` + msg + `}`, map[string]string{"Idempotency-Key": "order-3"},
			func(id string) bool { return id == events.KeyID(route, "order-3") }, "order-3"},
		{"key on another route", `{"route":"other","idempotency_key":"order-1",` + msg + `}`, nil,
			func(id string) bool { return id == events.KeyID("other", "order-1") }, "order-1"},
		{"neither: a random id", `{"route":"sim",` + msg + `}`, nil,
			func(id string) bool { return strings.HasPrefix(id, "h-") && len(id) == 28 && events.ValidToken(id) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := d.do(t, http.MethodPost, "/v1/jobs", tt.body, tt.header)
			require.Equal(t, http.StatusAccepted, r.status, "body %s", r.raw)
			id, _ := r.body["id"].(string)
			require.True(t, tt.wantID(id), "id %q", id)
			var head struct{ Route string }
			require.NoError(t, json.Unmarshal([]byte(tt.body), &head))
			require.Equal(t, head.Route, r.body["route"])
			self := "/v1/jobs/" + id
			require.Equal(t, self, r.header.Get("Location"))
			require.Equal(t, map[string]any{"self": self, "events": self + "/events?route=" + head.Route, "cancel": self + "/cancel"}, r.body["links"])

			// What was published is a valid submission, on the route's
			// subject, with the id known and the input untouched.
			data := d.lastIntake(t, d.ns.Submit(head.Route))
			m, err := events.DecodeSubmit(data)
			require.NoError(t, err)
			require.NotContains(t, string(data), `"route"`)
			require.Equal(t, tt.key, m.IdempotencyKey)
			if m.ID != "" {
				require.Equal(t, id, m.ID)
			} else {
				require.Equal(t, id, events.KeyID(head.Route, m.IdempotencyKey))
			}
			require.JSONEq(t, `{"prompt":"<b>&\u2028</b>","n":1}`, string(m.Input))
			require.Contains(t, string(data), `<b>&`, "HTML characters pass through unescaped")
		})
	}
}

func TestSubmitErrors(t *testing.T) {
	t.Parallel()
	d := setup(t, frontdoor.Config{})
	const msg = `"v":1,"model":"m","input":{}`
	tests := []struct {
		name   string
		method string
		body   string
		header map[string]string
		status int
		code   frontdoor.Code
		field  string
	}{
		{"not json", "POST", `not json`, nil, 400, frontdoor.CodeInvalidBody, ""},
		{"empty", "POST", ``, nil, 400, frontdoor.CodeInvalidBody, ""},
		{"array", "POST", `[1]`, nil, 400, frontdoor.CodeInvalidBody, ""},
		{"missing model", "POST", `{"route":"sim","v":1,"input":{}}`, nil, 400, frontdoor.CodeInvalidField, "model"},
		{"wrong version", "POST", `{"route":"sim","v":2,"model":"m","input":{}}`, nil, 400, frontdoor.CodeInvalidField, "v"},
		{"bad id", "POST", `{"route":"sim","id":"a.b",` + msg + `}`, nil, 400, frontdoor.CodeInvalidField, "id"},
		{"input not an object", "POST", `{"route":"sim","v":1,"model":"m","input":"x"}`, nil, 400, frontdoor.CodeInvalidField, "input"},
		{"deadline in the past", "POST", `{"route":"sim","deadline":"2020-01-01T00:00:00Z",` + msg + `}`, nil, 400, frontdoor.CodeInvalidField, "deadline"},
		{"missing route", "POST", `{` + msg + `}`, nil, 400, frontdoor.CodeInvalidField, "route"},
		{"route not a string", "POST", `{"route":7,` + msg + `}`, nil, 400, frontdoor.CodeInvalidField, "route"},
		{"bad route", "POST", `{"route":"a b",` + msg + `}`, nil, 400, frontdoor.CodeInvalidField, "route"},
		{"unknown route", "POST", `{"route":"nope",` + msg + `}`, nil, 404, frontdoor.CodeUnknownRoute, "route"},
		{"keys differ", "POST", `{"route":"sim","idempotency_key":"a",` + msg + `}`, map[string]string{"Idempotency-Key": "b"}, 400, frontdoor.CodeIdempotencyKeyMismatch, "idempotency_key"},
		{"header key too long", "POST", `{"route":"sim",` + msg + `}`, map[string]string{"Idempotency-Key": strings.Repeat("k", 257)}, 400, frontdoor.CodeInvalidField, "idempotency_key"},
		{"not json content", "POST", `{"route":"sim",` + msg + `}`, map[string]string{"Content-Type": "text/plain"}, 415, frontdoor.CodeUnsupportedMediaType, "Content-Type"},
		{"too large", "POST", `{"route":"sim",` + msg + `,"metadata":{"x":"` + strings.Repeat("x", events.MaxMessageBytes) + `"}}`, nil, 413, frontdoor.CodeBodyTooLarge, ""},
		{"wrong method", "DELETE", ``, nil, 405, frontdoor.CodeMethodNotAllowed, ""},
		{"no such endpoint", "GET", ``, nil, 404, frontdoor.CodeNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := "/v1/jobs"
			if tt.code == frontdoor.CodeNotFound {
				path = "/v2/jobs"
			}
			r := d.do(t, tt.method, path, tt.body, tt.header)
			requireError(t, r, tt.status, tt.code, tt.field)
			if tt.status == 405 {
				require.Equal(t, "GET, POST", r.header.Get("Allow"))
			}
		})
	}
	info, err := d.res.Intake.Info(context.Background())
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "nothing refused was published")
}

func TestGet(t *testing.T) {
	t.Parallel()
	d := setup(t, frontdoor.Config{})
	j := d.createJob(t, "job-1", state.Running)

	r := d.do(t, "GET", "/v1/jobs/job-1", "", nil)
	require.Equal(t, http.StatusOK, r.status)
	want, err := json.Marshal(j.Snapshot())
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(r.raw))
	require.NotContains(t, r.body, "input", "the snapshot leaves the submission input out")
	require.NotContains(t, r.body, "outbox")

	requireError(t, d.do(t, "GET", "/v1/jobs/nope", "", nil), 404, frontdoor.CodeJobNotFound, "")
	requireError(t, d.do(t, "GET", "/v1/jobs/bad.id", "", nil), 400, frontdoor.CodeInvalidParameter, "id")
	requireError(t, d.do(t, "DELETE", "/v1/jobs/job-1", "", nil), 405, frontdoor.CodeMethodNotAllowed, "")
}

// A job's outbound webhook deliveries, as package notify keeps them, are
// read per endpoint; none where no endpoint is configured.
func TestDeliveries(t *testing.T) {
	t.Parallel()
	d := setup(t, frontdoor.Config{})
	d.createJob(t, "job-1", state.Running)
	r := d.do(t, "GET", "/v1/jobs/job-1/deliveries", "", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"deliveries":[]}`, string(r.raw), "no outbox bucket: no endpoint")

	kv, err := events.EnsureBucket(context.Background(), d.js, d.ns.OutboxBucketConfig(events.Options{}))
	require.NoError(t, err)
	for _, dl := range []events.OutboxDelivery{
		{Endpoint: "app", State: events.OutboxDelivering, Seq: 3, Delivered: 2, Attempts: 2, Total: 4, Last: "HTTP 503", LastAt: time.Now().UTC()},
		{Endpoint: "submission", URL: "https://x.example/h", State: events.OutboxDelivered, Seq: 3, Delivered: 3, Attempts: 1, Total: 1, LastAt: time.Now().UTC()},
	} {
		b, err := json.Marshal(dl)
		require.NoError(t, err)
		_, err = kv.Put(context.Background(), events.OutboxKey("job-1", dl.Endpoint), b)
		require.NoError(t, err)
	}
	_, err = kv.Put(context.Background(), events.OutboxKey("job-10", "app"), []byte(`{"endpoint":"app","state":"delivered"}`))
	require.NoError(t, err)
	r = d.do(t, "GET", "/v1/jobs/job-1/deliveries", "", nil)
	require.Equal(t, http.StatusOK, r.status)
	var got struct{ Deliveries []events.OutboxDelivery }
	require.NoError(t, json.Unmarshal(r.raw, &got))
	require.Len(t, got.Deliveries, 2, "the job's, not job-10's")
	require.Equal(t, "app", got.Deliveries[0].Endpoint)
	require.Equal(t, "HTTP 503", got.Deliveries[0].Last)
	require.Equal(t, "https://x.example/h", got.Deliveries[1].URL)
	requireError(t, d.do(t, "GET", "/v1/jobs/nope/deliveries", "", nil), 404, frontdoor.CodeJobNotFound, "")
}

// A finished job shows no next check: none is due.
func TestGetOfAFinishedJobHasNoNextCheck(t *testing.T) {
	t.Parallel()
	d := setup(t, frontdoor.Config{})
	due := time.Now().Add(time.Minute).UTC()
	for id, st := range map[string]state.State{"running": state.Running, "finished": state.Succeeded} {
		_, created, err := d.jobs.Intake().Accept(context.Background(), &state.Job{ID: id, Route: route, Model: "m", State: st,
			CreatedAt: time.Now().UTC(), NextCheckAt: due})
		require.NoError(t, err)
		require.True(t, created)
	}
	r := d.do(t, "GET", "/v1/jobs/running", "", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, due.Format(time.RFC3339Nano), r.body["next_check_at"])
	r = d.do(t, "GET", "/v1/jobs/finished", "", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.NotContains(t, r.body, "next_check_at")
}

func TestCancel(t *testing.T) {
	t.Parallel()
	d := setup(t, frontdoor.Config{})
	now := time.Now().UTC()
	d.storeJob(t, &state.Job{ID: "running", Route: route, Model: "m", RemoteID: "rem-1", State: state.Running, CreatedAt: now, Deadline: now.Add(time.Hour)})
	d.createJob(t, "done", state.Succeeded)

	r := d.do(t, "POST", "/v1/jobs/running/cancel", `{"reason":"user left"}`, nil)
	require.Equal(t, http.StatusAccepted, r.status, "body %s", r.raw)
	require.Equal(t, "running", r.body["id"])
	c, err := events.DecodeCancel(d.lastIntake(t, d.ns.Cancel(route)))
	require.NoError(t, err)
	require.Equal(t, events.Cancel{V: 1, ID: "running", Reason: "user left", By: "api"}, *c)

	r = d.do(t, "POST", "/v1/jobs/running/cancel", "", nil)
	require.Equal(t, http.StatusAccepted, r.status, "no body is fine")

	requireError(t, d.do(t, "POST", "/v1/jobs/done/cancel", "", nil), 409, frontdoor.CodeJobTerminal, "")
	requireError(t, d.do(t, "POST", "/v1/jobs/nope/cancel", "", nil), 404, frontdoor.CodeJobNotFound, "")
	requireError(t, d.do(t, "POST", "/v1/jobs/running/cancel", `{"reason":5}`, nil), 400, frontdoor.CodeInvalidField, "reason")
	requireError(t, d.do(t, "POST", "/v1/jobs/running/cancel", `{"reason":"a`+"\\u0001"+`"}`, nil), 400, frontdoor.CodeInvalidField, "reason")
	requireError(t, d.do(t, "POST", "/v1/jobs/running/cancel", `[`, nil), 400, frontdoor.CodeInvalidBody, "")
	requireError(t, d.do(t, "POST", "/v1/jobs/running/cancel", `{"reason":"`+strings.Repeat("x", 5000)+`"}`, nil), 413, frontdoor.CodeBodyTooLarge, "")
	requireError(t, d.do(t, "GET", "/v1/jobs/running/cancel", "", nil), 405, frontdoor.CodeMethodNotAllowed, "")
}

func TestEventsReplayFromTheFirst(t *testing.T) {
	t.Parallel()
	d := setup(t, frontdoor.Config{})
	j := d.createJob(t, "job-1", state.Queued)
	s1 := d.publish(t, j, events.EventSubmitted, 1, state.Queued)
	d.publish(t, j, events.EventSubmitted, 1, state.Queued) // a republished duplicate
	s2 := d.publish(t, j, events.EventRunning, 2, state.Running)

	s := d.open(t, "/v1/jobs/job-1/events", nil)
	require.Equal(t, http.StatusOK, s.resp.StatusCode)
	require.Equal(t, "text/event-stream", s.resp.Header.Get("Content-Type"))
	var got []uint64
	for _, want := range []uint64{s1, s2} {
		m, ok := s.next(t)
		require.True(t, ok)
		require.Equal(t, strconv.FormatUint(want, 10), m.id)
		got = append(got, decode(t, m).Seq)
	}
	require.Equal(t, []uint64{1, 2}, got, "the duplicate is dropped")

	// Live: events published now arrive, and the terminal one ends it.
	s3 := d.publish(t, j, events.EventSucceeded, 3, state.Succeeded)
	m, ok := s.next(t)
	require.True(t, ok)
	require.Equal(t, strconv.FormatUint(s3, 10), m.id)
	require.Equal(t, state.Succeeded, decode(t, m).State)
	s.requireEnd(t)

	t.Run("resume after Last-Event-ID", func(t *testing.T) {
		s := d.open(t, "/v1/jobs/job-1/events", map[string]string{"Last-Event-ID": strconv.FormatUint(s2, 10)})
		m, ok := s.next(t)
		require.True(t, ok)
		require.Equal(t, strconv.FormatUint(s3, 10), m.id)
		s.requireEnd(t)
	})
	t.Run("resume after the end: 204", func(t *testing.T) {
		s := d.open(t, "/v1/jobs/job-1/events", map[string]string{"Last-Event-ID": strconv.FormatUint(s3, 10)})
		require.Equal(t, http.StatusNoContent, s.resp.StatusCode)
	})
	t.Run("since a time", func(t *testing.T) {
		m, err := d.res.Events.GetMsg(context.Background(), s2)
		require.NoError(t, err)
		s := d.open(t, "/v1/jobs/job-1/events?since="+m.Time.UTC().Format(time.RFC3339Nano), nil)
		var ids []string
		for {
			m, ok := s.next(t)
			if !ok {
				break
			}
			ids = append(ids, m.id)
		}
		require.Equal(t, []string{strconv.FormatUint(s2, 10), strconv.FormatUint(s3, 10)}, ids)
	})
}

func TestEventsBeforeTheJobExists(t *testing.T) {
	t.Parallel()
	d := setup(t, frontdoor.Config{})
	requireError(t, d.do(t, "GET", "/v1/jobs/new-1/events", "", nil), 404, frontdoor.CodeJobNotFound, "")

	// With its route named, the stream waits for the job's first event.
	j := &state.Job{ID: "new-1", Route: route}
	s := d.open(t, "/v1/jobs/new-1/events?route=sim", nil)
	require.Equal(t, http.StatusOK, s.resp.StatusCode)
	d.publish(t, j, events.EventRejected, 0, "")
	m, ok := s.next(t)
	require.True(t, ok)
	ev := decode(t, m)
	require.Equal(t, "deadline", ev.Rejection.Field)
	s.requireEnd(t) // the submission was refused: no job will come of it

	// A rejection of a later message for a job that exists does not end
	// the job's stream.
	d.createJob(t, "new-2", state.Queued)
	j = &state.Job{ID: "new-2", Route: route}
	s = d.open(t, "/v1/jobs/new-2/events", nil)
	d.publish(t, j, events.EventRejected, 0, "")
	d.publish(t, j, events.EventFailed, 1, state.Failed)
	m, ok = s.next(t)
	require.True(t, ok)
	require.Equal(t, events.EventRejected, m.event)
	m, ok = s.next(t)
	require.True(t, ok)
	require.Equal(t, events.EventFailed, m.event)
	s.requireEnd(t)
}

func TestEventsErrors(t *testing.T) {
	t.Parallel()
	d := setup(t, frontdoor.Config{})
	d.createJob(t, "job-1", state.Queued)
	tests := []struct {
		name, path string
		header     map[string]string
		status     int
		code       frontdoor.Code
		field      string
	}{
		{"unknown job", "/v1/jobs/nope/events", nil, 404, frontdoor.CodeJobNotFound, ""},
		{"bad id", "/v1/jobs/a.b/events", nil, 400, frontdoor.CodeInvalidParameter, "id"},
		{"unknown route", "/v1/jobs/job-1/events?route=nope", nil, 404, frontdoor.CodeUnknownRoute, "route"},
		{"bad route", "/v1/jobs/job-1/events?route=a.b", nil, 400, frontdoor.CodeInvalidParameter, "route"},
		{"bad since", "/v1/jobs/job-1/events?since=yesterday", nil, 400, frontdoor.CodeInvalidParameter, "since"},
		{"bad Last-Event-ID", "/v1/jobs/job-1/events", map[string]string{"Last-Event-ID": "x"}, 400, frontdoor.CodeInvalidParameter, "Last-Event-ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requireError(t, d.do(t, "GET", tt.path, "", tt.header), tt.status, tt.code, tt.field)
		})
	}
	requireError(t, d.do(t, "POST", "/v1/jobs/job-1/events", "{}", nil), 405, frontdoor.CodeMethodNotAllowed, "")
}

func TestEventsKeepAliveAndLimits(t *testing.T) {
	t.Parallel()
	d := setup(t, frontdoor.Config{MaxStreams: 1, KeepAlive: 20 * time.Millisecond, ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond})
	j := d.createJob(t, "job-1", state.Queued)
	s := d.open(t, "/v1/jobs/job-1/events", nil)
	require.Equal(t, http.StatusOK, s.resp.StatusCode)

	// Idle, the stream sends comments, and outlives the read and write
	// timeouts.
	for range 10 {
		select {
		case m := <-s.msgs:
			require.Equal(t, "keep-alive", m.comment)
		case <-time.After(10 * time.Second):
			t.Fatal("no keep-alive")
		}
	}
	r := d.do(t, "GET", "/v1/jobs/job-1/events", "", nil)
	requireError(t, r, 429, frontdoor.CodeTooManyStreams, "")
	require.NotEmpty(t, r.header.Get("Retry-After"))

	d.publish(t, j, events.EventCanceled, 1, state.Canceled)
	m, ok := s.next(t)
	require.True(t, ok)
	require.Equal(t, events.EventCanceled, m.event)
	s.requireEnd(t)

	// The slot is free again once the stream has ended.
	require.Eventually(t, func() bool {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, d.url+"/v1/jobs/job-1/events", nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer func() { _ = resp.Body.Close() }()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond)
}

func TestShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	d := setup(t, frontdoor.Config{})
	d.createJob(t, "job-1", state.Queued)
	s := d.open(t, "/v1/jobs/job-1/events", nil)
	require.Equal(t, http.StatusOK, s.resp.StatusCode)
	d.stop()
	s.requireEnd(t)
}

func TestUnavailable(t *testing.T) {
	t.Parallel()
	d := setup(t, frontdoor.Config{RequestTimeout: 200 * time.Millisecond})
	d.nats.Shutdown()
	d.nats.WaitForShutdown()
	r := d.do(t, "POST", "/v1/jobs", `{"route":"sim","v":1,"model":"m","input":{}}`, nil)
	requireError(t, r, 503, frontdoor.CodeUnavailable, "")
	require.Equal(t, "2", r.header.Get("Retry-After"))
	requireError(t, d.do(t, "GET", "/v1/jobs/job-1", "", nil), 503, frontdoor.CodeUnavailable, "")
	requireError(t, d.do(t, "GET", "/v1/jobs/job-1/events?route=sim", "", nil), 503, frontdoor.CodeUnavailable, "")
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, _, js := natstest.JetStream(t)
	res, err := events.Default.Setup(context.Background(), js, events.Options{})
	require.NoError(t, err)
	_, err = frontdoor.New(frontdoor.Config{}, js, events.Default, res, nil)
	require.ErrorContains(t, err, "Routes")
	_, err = frontdoor.New(frontdoor.Config{Routes: []string{"a.b"}}, js, events.Default, res, nil)
	require.ErrorContains(t, err, "a.b")
	_, err = frontdoor.New(frontdoor.Config{Routes: []string{"a"}, MaxStreams: -1}, js, events.Default, res, nil)
	require.ErrorContains(t, err, "MaxStreams")
}

// TestOpenAPIErrorCodes keeps api/openapi.yaml's list of error codes equal
// to the front door's.
func TestOpenAPIErrorCodes(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../../api/openapi.yaml")
	require.NoError(t, err)
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Properties map[string]struct {
						Enum []string `yaml:"enum"`
					} `yaml:"properties"`
				} `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(b, &doc))
	got := doc.Components.Schemas["Error"].Properties["error"].Properties["code"].Enum
	var want []string
	for _, c := range frontdoor.Codes {
		want = append(want, string(c))
	}
	slices.Sort(got)
	slices.Sort(want)
	require.Equal(t, want, got)
}
