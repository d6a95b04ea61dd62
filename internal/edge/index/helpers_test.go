package index_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/index"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// t0 is the creation time of the first job the tests make.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// env is a namespace on an embedded server, where tests publish events.
type env struct {
	t   *testing.T
	js  jetstream.JetStream
	res *events.Resources
	ns  events.Namespace
}

func setup(t *testing.T) *env {
	t.Helper()
	_, _, js := natstest.JetStream(t)
	return setupOn(t, js)
}

func setupOn(t *testing.T, js jetstream.JetStream) *env {
	t.Helper()
	res, err := events.Default.Setup(t.Context(), js, events.Options{})
	require.NoError(t, err)
	return &env{t: t, js: js, res: res, ns: events.Default}
}

// start builds an index and runs it until the test ends; it returns once
// the index has caught up with the stream.
func (e *env) start(cfg index.Config) *index.Index {
	e.t.Helper()
	x, err := index.New(cfg, e.js, e.ns, e.res)
	require.NoError(e.t, err)
	stop := e.run(x)
	e.t.Cleanup(stop)
	return x
}

// run runs x until the returned function is called, which waits for Run
// to return; it returns once x has caught up.
func (e *env) run(x *index.Index) func() {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx, ready) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		require.FailNow(e.t, "Run returned before it caught up", "%v", err)
	case <-time.After(30 * time.Second):
		cancel()
		require.FailNow(e.t, "the index did not catch up in 30s")
	}
	return func() {
		cancel()
		require.NoError(e.t, <-done)
	}
}

// job is a job's snapshot for an event.
func job(route, id string, created time.Time, st state.State) *state.Job {
	return &state.Job{ID: id, Route: route, Model: "m1", State: st, CreatedAt: created, UpdatedAt: created}
}

// publish publishes job's event seq (its state, at the job's UpdatedAt).
func (e *env) publish(j *state.Job, seq uint64) {
	e.t.Helper()
	typ := string(j.State)
	if seq == 1 {
		typ = events.EventSubmitted
	}
	ev := &events.Event{V: events.Version, Type: typ, Seq: seq, Time: j.UpdatedAt, Route: j.Route, JobID: j.ID, State: j.State, Job: j}
	b, err := ev.Encode()
	require.NoError(e.t, err)
	_, err = e.js.Publish(e.t.Context(), e.ns.Event(j.Route, j.ID), b)
	require.NoError(e.t, err)
}

// raw publishes data on subject.
func (e *env) raw(subject string, data []byte) {
	e.t.Helper()
	_, err := e.js.Publish(e.t.Context(), subject, data)
	require.NoError(e.t, err)
}

// seq returns the stream's last sequence.
func (e *env) seq() uint64 {
	e.t.Helper()
	info, err := e.res.Events.Info(e.t.Context())
	require.NoError(e.t, err)
	return info.State.LastSeq
}

// caughtUp waits until x has applied everything in the stream.
func (e *env) caughtUp(x *index.Index) {
	e.t.Helper()
	want := e.seq()
	require.Eventually(e.t, func() bool { return x.Applied() >= want }, 10*time.Second, 5*time.Millisecond, "the index applies up to stream sequence %d", want)
}

// ids returns the ids of a page's jobs.
func ids(p index.Page) []string {
	var out []string
	for _, j := range p.Jobs {
		out = append(out, j.ID)
	}
	return out
}
