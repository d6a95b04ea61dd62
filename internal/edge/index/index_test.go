package index_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/index"
	"github.com/pollux-dev/pollux/internal/edge/tenant"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// The index holds what the stream says of each job when it starts, and
// what comes after.
func TestReplayThenLive(t *testing.T) {
	t.Parallel()
	e := setup(t)
	p := 0.5
	q := 3
	a := job("r1", "a", t0, state.Queued)
	a.RemoteID, a.IdempotencyKey, a.QueuePosition, a.Tracked = "rem-a", "key-a", &q, true
	e.publish(a, 1)
	a2 := *a
	a2.State, a2.Progress, a2.QueuePosition, a2.Polls, a2.UpdatedAt = state.Running, &p, nil, 4, t0.Add(time.Minute)
	e.publish(&a2, 2)
	e.publish(job("r2", "b", t0.Add(time.Second), state.Queued), 1)

	x := e.start(index.Config{})
	got, ok := x.Get("a")
	require.True(t, ok)
	require.Equal(t, index.Entry{
		ID: "a", Route: "r1", Model: "m1", RemoteID: "rem-a", IdempotencyKey: "key-a", State: state.Running,
		Tracked: true, CreatedAt: t0, UpdatedAt: t0.Add(time.Minute), Polls: 4, Progress: &p, Seq: 2, Stream: 2,
	}, got)
	require.Equal(t, map[state.State]int{state.Running: 1, state.Queued: 1}, x.Counts(""))
	require.Equal(t, map[state.State]int{state.Running: 1}, x.Counts("r1"))
	require.Empty(t, x.Counts("nope"))
	require.Equal(t, []string{"r1", "r2"}, x.Routes())
	n, bytes := x.Size()
	require.Equal(t, 2, n)
	require.Positive(t, bytes)

	// Live: a new job, and b ends.
	e.publish(job("r1", "c", t0.Add(2*time.Second), state.Queued), 1)
	b := job("r2", "b", t0.Add(time.Second), state.Failed)
	b.Reason = "boom"
	e.publish(b, 2)
	e.caughtUp(x)
	got, _ = x.Get("b")
	require.Equal(t, state.Failed, got.State)
	require.Equal(t, "boom", got.Reason)
	require.Equal(t, map[state.State]int{state.Running: 1, state.Queued: 1, state.Failed: 1}, x.Counts(""))
	page, err := x.List(index.Query{})
	require.NoError(t, err)
	require.Equal(t, []string{"c", "b", "a"}, ids(page))
	require.Equal(t, 3, page.Total)
	require.Empty(t, page.Next)
}

// An event applies only when its Seq is greater than the job's: a
// duplicate, a redelivery or an older event changes nothing.
func TestOnlyNewerEventsApply(t *testing.T) {
	t.Parallel()
	e := setup(t)
	x := e.start(index.Config{})
	live := x.Subscribe(t.Context(), 16)

	j := job("r", "j", t0, state.Running)
	e.publish(j, 2)
	older := job("r", "j", t0, state.Queued)
	e.publish(older, 1) // late
	e.publish(j, 2)     // duplicate
	done := job("r", "j", t0, state.Succeeded)
	e.publish(done, 3)
	e.caughtUp(x)

	got, _ := x.Get("j")
	require.Equal(t, state.Succeeded, got.State)
	require.Equal(t, uint64(3), got.Seq)
	require.Equal(t, map[state.State]int{state.Succeeded: 1}, x.Counts("r"))
	// Subscribers saw the two changes, not the ignored events.
	require.Equal(t, state.Running, (<-live).State)
	require.Equal(t, state.Succeeded, (<-live).State)
	require.Empty(t, live)
}

// A process started later rebuilds the same index from the stream.
func TestReplayAfterProcessRestart(t *testing.T) {
	t.Parallel()
	e := setup(t)
	first, err := index.New(index.Config{}, e.js, e.ns, e.res)
	require.NoError(t, err)
	stop := e.run(first)
	for i := range 40 {
		j := job(fmt.Sprintf("r%d", i%3), fmt.Sprintf("j%02d", i), t0.Add(time.Duration(i)*time.Second), state.Queued)
		e.publish(j, 1)
		if i%2 == 0 {
			j.State = state.Succeeded
			e.publish(j, 2)
		}
	}
	e.caughtUp(first)
	before, err := first.List(index.Query{Limit: 500})
	require.NoError(t, err)
	stop()

	second := e.start(index.Config{})
	after, err := second.List(index.Query{Limit: 500})
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.Len(t, after.Jobs, 40)
	require.Equal(t, first.Counts(""), second.Counts(""))
}

// A NATS server restart does not stop the index: it goes on after the last
// event it applied, and applies each event once.
func TestSurvivesNATSServerRestart(t *testing.T) {
	t.Parallel()
	srv := natstest.NewRestartable(t)
	_, js := srv.Connect(t)
	e := setupOn(t, js)
	for i := range 10 {
		e.publish(job("r", fmt.Sprintf("before%d", i), t0.Add(time.Duration(i)*time.Second), state.Queued), 1)
	}
	x := e.start(index.Config{Logger: zerolog.New(zerolog.NewTestWriter(t))})
	live := x.Subscribe(t.Context(), 1000)
	n, _ := x.Size()
	require.Equal(t, 10, n)

	publishAfter := func(round int) {
		require.Eventually(t, func() bool {
			_, err := js.Stream(t.Context(), e.ns.EventsStream())
			return err == nil
		}, 20*time.Second, 50*time.Millisecond, "the server is back")
		for i := range 10 {
			e.publish(job("r", fmt.Sprintf("after%d-%d", round, i), t0.Add(time.Duration(round)*time.Hour+time.Duration(i)*time.Second), state.Queued), 1)
		}
		e.publish(job("r", fmt.Sprintf("before%d", round), t0.Add(time.Duration(round)*time.Second), state.Succeeded), 2)
		require.Eventually(t, func() bool {
			got, _ := x.Get(fmt.Sprintf("before%d", round))
			n, _ := x.Size()
			return n == 10+10*round && got.State == state.Succeeded
		}, 30*time.Second, 10*time.Millisecond, "the index follows the stream after restart %d", round)
	}

	// A short outage.
	srv.Restart(t, 100*time.Millisecond)
	publishAfter(1)
	// A longer one, with events published while the index was away.
	srv.Restart(t, 1500*time.Millisecond)
	publishAfter(2)

	require.Equal(t, map[state.State]int{state.Queued: 28, state.Succeeded: 2}, x.Counts("r"))
	// Every change was seen once: 11 after each restart, nothing replayed.
	require.Len(t, live, 22)
}

// Run started while the server is down waits for it, then catches up.
func TestRunWaitsForTheServer(t *testing.T) {
	t.Parallel()
	srv := natstest.NewRestartable(t)
	_, js := srv.Connect(t)
	e := setupOn(t, js)
	e.publish(job("r", "a", t0, state.Queued), 1)
	logs := &syncBuffer{}
	x, err := index.New(index.Config{Logger: zerolog.New(logs)}, js, e.ns, e.res)
	require.NoError(t, err)
	srv.Stop()

	ctx, cancel := context.WithCancel(t.Context())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- x.Run(ctx, ready) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "reading the events stream failed") },
		30*time.Second, 10*time.Millisecond, "Run reports that it cannot read")
	select {
	case <-ready:
		require.FailNow(t, "ready before the server is back")
	default:
	}
	srv.Start(t)
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the index did not catch up once the server was back")
	}
	_, ok := x.Get("a")
	require.True(t, ok)
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Run again after it returned goes on after the last event applied: what
// came while it was stopped applies, nothing is applied twice.
func TestRunResumesAfterTheLastEventApplied(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.publish(job("r", "a", t0, state.Queued), 1)
	x, err := index.New(index.Config{}, e.js, e.ns, e.res)
	require.NoError(t, err)
	live := x.Subscribe(t.Context(), 100)
	stop := e.run(x)
	require.Equal(t, "a", (<-live).ID)
	stop()

	e.publish(job("r", "b", t0.Add(time.Second), state.Queued), 1)
	e.publish(job("r", "a", t0, state.Running), 2)
	stop = e.run(x) // returns once caught up
	defer stop()
	require.Equal(t, "b", (<-live).ID)
	got := <-live
	require.Equal(t, "a", got.ID)
	require.Equal(t, state.Running, got.State)
	require.Empty(t, live)
	require.Equal(t, e.seq(), x.Applied())
}

// Messages on the events subjects that are not events are ignored and
// counted; the index goes on.
func TestGarbageIsIgnoredAndCounted(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.raw(e.ns.Event("r", "x"), []byte("not json"))
	logs := &syncBuffer{}
	x := e.start(index.Config{Logger: zerolog.New(logs)})
	require.Equal(t, uint64(1), x.Garbage())
	require.Contains(t, logs.String(), `{"level":"debug","error":"not an event: `)

	other := &events.Event{V: events.Version, Type: "queued", Seq: 1, Route: "r", JobID: "other", Time: t0}
	mismatch, err := other.Encode()
	require.NoError(t, err)
	noSeq := &events.Event{V: events.Version, Type: "queued", Route: "r", JobID: "x", Time: t0}
	zero, err := noSeq.Encode()
	require.NoError(t, err)
	for _, m := range []struct{ subject, data string }{
		{e.ns.Event("r", "x"), `{"v":99,"type":"queued","seq":1,"route":"r","job_id":"x"}`}, // unknown version
		{e.ns.Event("r", "x"), `{"v":1,"seq":1,"route":"r","job_id":"x"}`},                  // no type
		{e.ns.Event("r", "x"), string(mismatch)},                                            // another job's event
		{e.ns.Event("r", "x"), string(zero)},                                                // no seq
		{e.ns.Event("r", "x"), ""},                                                          // empty
		{e.ns.RouteEvent("r"), `{"v":1,"type":"route_paused","route":"r"}`},                 // no by
		{e.ns.RouteEvent("r"), `[]`},
		{e.ns.Events()[:len(e.ns.Events())-1] + "r.x.extra", `{}`}, // too deep
	} {
		e.raw(m.subject, []byte(m.data))
	}
	e.publish(job("r", "fine", t0, state.Queued), 1)
	e.caughtUp(x)
	require.Equal(t, uint64(9), x.Garbage())
	require.Equal(t, 9, strings.Count(logs.String(), `"level":"debug"`), "each is logged once, at debug level")
	require.NotContains(t, logs.String(), `"level":"warn"`)
	n, _ := x.Size()
	require.Equal(t, 1, n)
	_, ok := x.Get("fine")
	require.True(t, ok)
	require.Empty(t, x.RouteEvents("r"))
}

// Route events are kept per route, the latest MaxRouteEvents, and are not
// jobs.
func TestRouteEvents(t *testing.T) {
	t.Parallel()
	e := setup(t)
	x := e.start(index.Config{})
	for i := range index.MaxRouteEvents + 5 {
		ev := events.RouteEvent{V: events.Version, Type: events.EventRoutePaused, Time: t0.Add(time.Duration(i) * time.Second), Route: "r", By: "alice", Reason: fmt.Sprint(i)}
		if i%2 == 1 {
			ev.Type = events.EventRouteResumed
		}
		b, err := json.Marshal(ev)
		require.NoError(t, err)
		e.raw(e.ns.RouteEvent("r"), b)
	}
	e.caughtUp(x)
	got := x.RouteEvents("r")
	require.Len(t, got, index.MaxRouteEvents)
	require.Equal(t, "5", got[0].Reason)
	require.Equal(t, fmt.Sprint(index.MaxRouteEvents+4), got[len(got)-1].Reason)
	require.Empty(t, x.RouteEvents("other"))
	n, _ := x.Size()
	require.Zero(t, n)
	require.Equal(t, []string{"r"}, x.Routes())
	require.Zero(t, x.Garbage())
}

// A rejected intake message is listed, marked, unless a job has its id: a
// refused cancel leaves the job as it is.
func TestRejections(t *testing.T) {
	t.Parallel()
	e := setup(t)
	x := e.start(index.Config{})
	reject := func(route, id, why string) {
		ev := &events.Event{V: events.Version, Type: events.EventRejected, Time: t0, Route: route, JobID: id,
			Rejection: &events.Rejection{Kind: events.KindSubmit, Error: why}}
		b, err := ev.Encode()
		require.NoError(t, err)
		e.raw(e.ns.Event(route, id), b)
	}
	e.publish(job("r", "real", t0, state.Running), 2)
	reject("r", "real", "cancel: already running elsewhere")
	reject("r", "bad", "input: required")
	e.caughtUp(x)

	got, _ := x.Get("real")
	require.Equal(t, state.Running, got.State)
	require.False(t, got.Rejected)
	got, _ = x.Get("bad")
	require.True(t, got.Rejected)
	require.Equal(t, "input: required", got.RejectionError)
	require.Empty(t, got.State)
	require.Equal(t, map[state.State]int{state.Running: 1}, x.Counts(""))

	// A later submission of that id replaces the rejection.
	e.publish(job("r", "bad", t0.Add(time.Second), state.Queued), 1)
	e.caughtUp(x)
	got, _ = x.Get("bad")
	require.False(t, got.Rejected)
	require.Equal(t, state.Queued, got.State)
	page, err := x.List(index.Query{})
	require.NoError(t, err)
	require.Equal(t, []string{"bad", "real"}, ids(page))
}

// A rejection is its app's: an app's viewer lists its own rejections, and
// no other app's.
func TestRejectionsAreTheirApps(t *testing.T) {
	t.Parallel()
	e := setup(t)
	x := e.start(index.Config{})
	for id, app := range map[string]string{"studio-over": "studio", "rival-over": "rival", "none": ""} {
		ev := &events.Event{V: events.Version, Type: events.EventRejected, Time: t0, Route: "r", JobID: id,
			Rejection: &events.Rejection{Kind: events.KindSubmit, Field: "app", Error: "over its budget", App: app}}
		b, err := ev.Encode()
		require.NoError(t, err)
		e.raw(e.ns.Event("r", id), b)
	}
	e.caughtUp(x)
	for viewer, want := range map[tenant.Viewer][]string{
		tenant.Of("studio"): {"studio-over"},
		tenant.Of("rival"):  {"rival-over"},
		tenant.Of(""):       {"none"},
		tenant.Operator:     {"none", "rival-over", "studio-over"},
	} {
		page, err := x.List(index.Query{Viewer: viewer})
		require.NoError(t, err)
		got := ids(page)
		slices.Sort(got)
		require.Equal(t, want, got, "viewer %+v", viewer)
	}
}

// Beyond MaxJobs the oldest terminal jobs are forgotten; jobs not ended
// never are.
func TestMaxJobsForgetsTheOldestTerminalJobs(t *testing.T) {
	t.Parallel()
	e := setup(t)
	x := e.start(index.Config{MaxJobs: 5})
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }
	e.publish(job("r", "old-running", at(0), state.Running), 1)
	e.publish(job("r", "old-done", at(1), state.Succeeded), 1)
	e.publish(job("r", "old-queued", at(2), state.Queued), 1)
	e.publish(job("r", "mid-failed", at(3), state.Failed), 1)
	e.publish(job("r", "new-done", at(4), state.Succeeded), 1)
	e.caughtUp(x)
	n, _ := x.Size()
	require.Equal(t, 5, n)

	e.publish(job("r", "newest", at(5), state.Queued), 1)
	e.caughtUp(x)
	_, ok := x.Get("old-done")
	require.False(t, ok, "the oldest terminal job is forgotten")
	_, ok = x.Get("old-running")
	require.True(t, ok, "a running job is kept however old")

	// old-queued ends: it is now the oldest terminal job.
	e.publish(job("r", "old-queued", at(2), state.Canceled), 2)
	e.publish(job("r", "newer", at(6), state.Queued), 1)
	e.caughtUp(x)
	page, err := x.List(index.Query{})
	require.NoError(t, err)
	require.Equal(t, []string{"newer", "newest", "new-done", "mid-failed", "old-running"}, ids(page))
	require.Equal(t, map[state.State]int{state.Queued: 2, state.Succeeded: 1, state.Failed: 1, state.Running: 1}, x.Counts("r"))

	// Only jobs not ended: the index holds more than MaxJobs.
	for i := range 6 {
		e.publish(job("r", fmt.Sprintf("q%d", i), at(10+i), state.Queued), 1)
	}
	e.caughtUp(x)
	n, _ = x.Size()
	require.Equal(t, 9, n)
	require.Equal(t, map[state.State]int{state.Queued: 8, state.Running: 1}, x.Counts("r"))
}

// A subscriber gets changes as they apply; one that does not read loses
// updates and never holds the index back; its channel closes with its
// context.
func TestSubscribe(t *testing.T) {
	t.Parallel()
	e := setup(t)
	x := e.start(index.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	reader := x.Subscribe(ctx, 100)
	stuck := x.Subscribe(ctx, 1)

	for i := range 50 {
		e.publish(job("r", fmt.Sprintf("j%d", i), t0.Add(time.Duration(i)*time.Second), state.Queued), 1)
	}
	e.caughtUp(x)
	n, _ := x.Size()
	require.Equal(t, 50, n, "a full subscriber does not hold the index back")
	for i := range 50 {
		got := <-reader
		require.Equal(t, fmt.Sprintf("j%d", i), got.ID)
	}
	require.Len(t, stuck, 1)
	require.Equal(t, "j0", (<-stuck).ID)

	cancel()
	for range reader {
	}
	for range stuck {
	}
	// Changes after the end go nowhere.
	e.publish(job("r", "late", t0.Add(time.Hour), state.Queued), 1)
	e.caughtUp(x)
}

// An entry's fields come from its latest event's snapshot.
func TestModels(t *testing.T) {
	t.Parallel()
	e := setup(t)
	x := e.start(index.Config{})
	for i, m := range []string{"flux", "sdxl", "flux", "wan"} {
		j := job([]string{"a", "b"}[i%2], fmt.Sprintf("j%d", i), t0.Add(time.Duration(i)*time.Second), state.Queued)
		j.Model = m
		e.publish(j, 1)
	}
	e.caughtUp(x)
	require.Equal(t, []string{"flux"}, x.Models("a"))
	require.Equal(t, []string{"sdxl", "wan"}, x.Models("b"))
	require.Equal(t, []string{"flux", "sdxl", "wan"}, x.Models(""))
	require.Empty(t, x.Models("c"))
}

// New checks its configuration.
func TestNewChecksItsConfig(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, err := index.New(index.Config{MaxJobs: -1}, e.js, e.ns, e.res)
	require.ErrorContains(t, err, "MaxJobs")
	_, err = index.New(index.Config{}, nil, e.ns, e.res)
	require.Error(t, err)
}

// Subscribers that come and go while events apply never make the index
// send on a closed channel or wait.
func TestSubscribersComeAndGo(t *testing.T) {
	t.Parallel()
	e := setup(t)
	x := e.start(index.Config{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				ctx, cancel := context.WithCancel(t.Context())
				ch := x.Subscribe(ctx, 1)
				cancel()
				for range ch { // drains, ends once closed
				}
			}
		})
	}
	for i := range 200 {
		e.publish(job("r", fmt.Sprintf("j%d", i), t0.Add(time.Duration(i)*time.Second), state.Queued), 1)
	}
	wg.Wait()
	e.caughtUp(x)
	n, _ := x.Size()
	require.Equal(t, 200, n)
}
