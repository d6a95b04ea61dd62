package frontdoor_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	proute "github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/edge/index"
	"github.com/pollux-dev/pollux/internal/testkit/stack"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

const route = "sim"

// door is one test's front door on an embedded NATS server.
type door struct {
	t     *testing.T
	index *index.Index
	url   string
	nats  *server.Server
	js    jetstream.JetStream
	ns    events.Namespace
	res   *events.Resources
	jobs  *jobs.Owner
	stop  context.CancelFunc
	done  chan error
	// server is the front door.
	server *frontdoor.Server
}

// setup runs a front door for routes "sim" and "other" until the test ends.
func setup(t *testing.T, cfg frontdoor.Config) *door {
	t.Helper()
	return setupWith(t, cfg, nil)
}

// setupWith is setup, with more configuration made by with once NATS runs
// (an index, pauses: what needs the streams and buckets).
func setupWith(t *testing.T, cfg frontdoor.Config, with func(d *door, cfg *frontdoor.Config)) *door {
	t.Helper()
	return setupOn(t, stack.New(t, stack.Config{}), cfg, with)
}

// setupOn is setupWith on stack s.
func setupOn(t *testing.T, s *stack.Stack, cfg frontdoor.Config, with func(d *door, cfg *frontdoor.Config)) *door {
	t.Helper()
	js, ns, res, owner := s.JS, s.NS, s.Res, s.Jobs
	cfg.Routes = []string{route, "other"}
	d := &door{t: t, nats: s.Server, js: js, ns: ns, res: res, jobs: owner, done: make(chan error, 1)}
	if with != nil {
		with(d, &cfg)
	}
	fd, err := frontdoor.New(cfg, js, ns, res, owner)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	d.url, d.stop, d.server = "http://"+ln.Addr().String(), cancel, fd
	go func() { d.done <- fd.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-d.done)
	})
	return d
}

// background runs fn until the test ends, waiting for it then; fn closes
// ready once it is ready to serve, and setup waits for that.
func background(t *testing.T, fn func(ctx context.Context, ready chan<- struct{}) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- fn(ctx, ready) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("stopped before it was ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not ready within 10s")
	}
}

// withIndex gives the front door a jobs index over the events stream.
func withIndex(d *door, cfg *frontdoor.Config) {
	x, err := index.New(index.Config{}, d.js, d.ns, d.res)
	require.NoError(d.t, err)
	background(d.t, x.Run)
	cfg.Index, d.index = x, x
}

// withPauses lets the front door pause routes.
func withPauses(d *door, cfg *frontdoor.Config) {
	p := proute.NewPauses(d.res.Routes, zerolog.Nop())
	background(d.t, p.Run)
	cfg.Pauses = p
}

// reply is a decoded JSON response.
type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

// code returns an error reply's code and field.
func (r reply) code() (code, field string) {
	e, _ := r.body["error"].(map[string]any)
	code, _ = e["code"].(string)
	field, _ = e["field"].(string)
	return code, field
}

func (d *door) do(t *testing.T, method, path, body string, header map[string]string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, d.url+path, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if h := header["Host"]; h != "" {
		req.Host = h // the header a client sends is req.Host's
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 {
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"), "body %s", raw)
		require.NoError(t, json.Unmarshal(raw, &r.body), "body %s", raw)
	}
	return r
}

// requireError checks an error reply's status, code and field, and that it
// has a message.
func requireError(t *testing.T, r reply, status int, code frontdoor.Code, field string) {
	t.Helper()
	require.Equal(t, status, r.status, "body %s", r.raw)
	c, f := r.code()
	require.Equal(t, string(code), c, "body %s", r.raw)
	require.Equal(t, field, f, "body %s", r.raw)
	e := r.body["error"].(map[string]any)
	require.NotEmpty(t, e["message"])
}

// lastIntake returns the latest message on an intake subject.
func (d *door) lastIntake(t *testing.T, subject string) []byte {
	t.Helper()
	m, err := d.res.Intake.GetLastMsgForSubject(context.Background(), subject)
	require.NoError(t, err)
	return m.Data
}

// createJob stores a job record as ingest would.
// testApp is the app of the jobs createJob makes: the tokens that read
// them name it (app=team).
const testApp = "team"

func (d *door) createJob(t *testing.T, id string, st state.State) *state.Job {
	t.Helper()
	return d.storeJob(t, &state.Job{ID: id, Route: route, Model: "m", State: st, Input: json.RawMessage(`{"secret":"input"}`), App: testApp,
		CreatedAt: time.Now().UTC(), Outbox: []state.OutboxEvent{{Seq: 9, Type: "queued", State: state.Queued, At: time.Now()}}})
}

// storeJob stores job j's record as ingest would (of testApp when it
// names no app).
func (d *door) storeJob(t *testing.T, j *state.Job) *state.Job {
	t.Helper()
	j.App = cmp.Or(j.App, testApp)
	_, created, err := d.jobs.Intake().Accept(context.Background(), j)
	require.NoError(t, err)
	require.True(t, created)
	return j
}

// publish publishes an event of the job and returns its stream sequence.
func (d *door) publish(t *testing.T, j *state.Job, typ string, seq uint64, st state.State) uint64 {
	t.Helper()
	cp := *j
	cp.State = st
	ev := events.NewEvent(&cp, state.OutboxEvent{Seq: seq, Type: typ, State: st, At: time.Now()})
	if typ == events.EventRejected {
		ev = &events.Event{V: events.Version, Type: typ, Time: time.Now().UTC(), Route: j.Route, JobID: j.ID,
			Rejection: &events.Rejection{Kind: events.KindSubmit, Subject: d.ns.Submit(j.Route), Error: "deadline: in the past", Field: "deadline"}}
	}
	b, err := ev.Encode()
	require.NoError(t, err)
	ack, err := d.js.Publish(context.Background(), d.ns.Event(j.Route, j.ID), b)
	require.NoError(t, err)
	return ack.Sequence
}

// sse is one message of an event stream: an event or a comment.
type sse struct {
	id, event, data, comment string
}

// stream is an open event stream.
type stream struct {
	resp *http.Response
	msgs chan sse
}

// open starts an event stream and reads it in the background; msgs is
// closed when the server ends the stream.
func (d *door) open(t *testing.T, path string, header map[string]string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url+path, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	s := &stream{resp: resp, msgs: make(chan sse, 100)}
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		_ = resp.Body.Close()
		<-done
	})
	go func() {
		defer close(done)
		defer close(s.msgs)
		sc := bufio.NewScanner(resp.Body)
		var cur sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if cur != (sse{}) {
					s.msgs <- cur
				}
				cur = sse{}
			case strings.HasPrefix(line, ": "):
				cur.comment = strings.TrimPrefix(line, ": ")
			case strings.HasPrefix(line, "id: "):
				cur.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				cur.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				cur.data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return s
}

// next returns the stream's next event, skipping comments; ok is false
// when the stream has ended.
func (s *stream) next(t *testing.T) (ev sse, ok bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok || m.comment == "" {
				return m, ok
			}
		case <-timeout:
			t.Fatal("no event within 10s")
		}
	}
}

// requireEnd checks that the server ends the stream with no more events.
func (s *stream) requireEnd(t *testing.T) {
	t.Helper()
	ev, ok := s.next(t)
	require.False(t, ok, "the stream goes on with %+v", ev)
}

// decode parses an event's data.
func decode(t *testing.T, m sse) *events.Event {
	t.Helper()
	ev, err := events.DecodeEvent([]byte(m.data))
	require.NoError(t, err)
	require.Equal(t, ev.Type, m.event)
	return ev
}
