package jobs_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

// rig is an owner on a fresh embedded server, with a consumer of route
// "r"'s checks standing in for the poller.
type rig struct {
	t     *testing.T
	ctx   context.Context
	o     *jobs.Owner
	js    jetstream.JetStream
	res   *events.Resources
	cons  jetstream.Consumer
	hooks *tally
}

// tally counts what the owner's hooks saw.
type tally struct {
	mu        sync.Mutex
	published []string
	terminal  []*state.Job
}

func (h *tally) finished() []*state.Job {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*state.Job(nil), h.terminal...)
}

func newRig(t *testing.T) *rig {
	t.Helper()
	_, _, js := natstest.JetStream(t)
	return rigOn(t, js)
}

func rigOn(t *testing.T, js jetstream.JetStream) *rig {
	t.Helper()
	ctx := context.Background()
	res, err := events.Default.Setup(ctx, js, events.Options{})
	require.NoError(t, err)
	h := &tally{}
	// Checks stay in the consumer (parking off), so a test has its check
	// back at once; park_test.go tests parking.
	o := jobs.New(events.Default, js, res, jobs.Config{Options: events.Options{ParkAfter: -1}, Hooks: jobs.Hooks{
		Published: func(_, typ string) { h.mu.Lock(); h.published = append(h.published, typ); h.mu.Unlock() },
		Terminal:  func(j *state.Job) { h.mu.Lock(); h.terminal = append(h.terminal, j); h.mu.Unlock() },
	}})
	cons, err := events.EnsureConsumer(ctx, res.Checks, events.Default.PollerConsumerConfig("r", 0, 1, events.Options{}))
	require.NoError(t, err)
	return &rig{t: t, ctx: ctx, o: o, js: js, res: res, cons: cons, hooks: h}
}

// submission is a job about to be submitted, its first attempt marked.
func submission(id string, webhook bool) *state.Job {
	now := time.Now().UTC()
	return &state.Job{ID: id, Route: "r", Model: "m", State: state.Pending, Input: []byte(`{"p":1}`), IdempotencyKey: id,
		CreatedAt: now, Deadline: now.Add(time.Hour), WebhookExpected: webhook,
		SubmitAttempts: 1, SubmitInDoubt: true, AttemptedAt: now, AttemptID: "a1"}
}

// submit takes a job through Accept and Submitted, its first poll due at
// due.
func (r *rig) submit(id string, webhook bool, due time.Time) jobs.Record {
	r.t.Helper()
	rec, created, err := r.o.Intake().Accept(r.ctx, submission(id, webhook))
	require.NoError(r.t, err)
	require.True(r.t, created)
	rec, err = r.o.Intake().Submitted(r.ctx, rec, jobs.Created{RemoteID: "rem-" + id, Due: due,
		Obs: state.Observation{State: state.Queued, Raw: "starting", Source: state.FromSubmit, At: time.Now().UTC()}})
	require.NoError(r.t, err)
	return rec
}

// next fetches the next check delivery.
func (r *rig) next() jetstream.Msg {
	r.t.Helper()
	b, err := r.cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(r.t, err)
	for msg := range b.Messages() {
		return msg
	}
	r.t.Fatalf("no check delivered: %v", b.Error())
	return nil
}

// poll opens the next delivery that is a poll (a first delivery is sent
// back at once).
func (r *rig) poll() (*jobs.Delivery, jetstream.Msg) {
	r.t.Helper()
	for range 5 {
		msg := r.next()
		d, err := r.o.Polls().Open(r.ctx, msg)
		require.NoError(r.t, err)
		if d.N > 1 || d.Check.Poll == nil {
			return d, msg
		}
		require.NoError(r.t, msg.NakWithDelay(0))
	}
	r.t.Fatal("no poll delivery")
	return nil, nil
}

// settle settles msg by outcome.
func (r *rig) settle(msg jetstream.Msg, out events.Outcome) {
	r.t.Helper()
	if out.IsLater() {
		out = events.Later(0) // come back now: the test polls again
	}
	require.NoError(r.t, out.Settle(msg))
}

func (r *rig) get(id string) *state.Job {
	r.t.Helper()
	j, err := r.o.Get(r.ctx, id)
	require.NoError(r.t, err)
	return j
}

// revision is the job record's revision: in a bucket of one job, the
// number of writes it had.
func (r *rig) revision(id string) uint64 {
	r.t.Helper()
	e, err := r.res.Jobs.Get(r.ctx, id)
	require.NoError(r.t, err)
	return e.Revision()
}

func (r *rig) check(id string) jobs.CheckView {
	r.t.Helper()
	v, err := r.o.Check(r.ctx, "r", id)
	require.NoError(r.t, err)
	return v
}

func (r *rig) events(id string) []*events.Event {
	r.t.Helper()
	c, err := r.js.OrderedConsumer(r.ctx, events.Default.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.Default.Event("r", id)},
	})
	require.NoError(r.t, err)
	var out []*events.Event
	for {
		msg, err := c.Next(jetstream.FetchMaxWait(300 * time.Millisecond))
		if err != nil {
			return out
		}
		ev, err := events.DecodeEvent(msg.Data())
		require.NoError(r.t, err)
		out = append(out, ev)
	}
}

func types(evs []*events.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

// running and done are status answers.
func running() provider.Status {
	return provider.Status{Observation: state.Observation{State: state.Running, Raw: "processing"}}
}

func done() provider.Status {
	return provider.Status{Observation: state.Observation{State: state.Succeeded, Raw: "succeeded"}}
}

var errTimeout = errors.New("i/o timeout")
