package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/dev"
	"github.com/pollux-dev/pollux/internal/jobs"
	"github.com/pollux-dev/pollux/internal/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
)

// env is one test's running Pollux.
type env struct {
	*dev.Stack
	nc  *nats.Conn
	js  jetstream.JetStream
	ns  events.Namespace
	log *eventLog
	// inexactPolls marks a scenario that loses the count of quiet polls
	// by design (a repartition: a new consumer's deliveries start anew).
	inexactPolls bool
}

// start runs the stack on a fresh embedded server until the test ends.
func start(t *testing.T, sc dev.StackConfig) *env {
	t.Helper()
	srv := natstest.Server(t)
	nc, js := natstest.Connect(t, srv)
	return startWith(t, nc, js, sc)
}

// startWith runs the stack on a connection until the test ends.
func startWith(t *testing.T, nc *nats.Conn, js jetstream.JetStream, sc dev.StackConfig) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	t.Cleanup(func() {
		cancel()
		require.NoError(t, g.Wait())
	})
	// POLLUX_TEST_LOG=dir keeps each test's logs in dir/<test>.json.
	if dir := os.Getenv("POLLUX_TEST_LOG"); dir != "" {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		f, err := os.Create(filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".json"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = f.Close() })
		sc.Logger = zerolog.New(f).With().Timestamp().Logger()
	}
	stack, err := dev.Start(gctx, g, nc, sc)
	require.NoError(t, err)
	e := &env{Stack: stack, nc: nc, js: js, ns: stack.Env.NS}
	e.log = follow(t, js, e.ns)
	return e
}

// eventLog collects every job event in stream order, and the routes'
// events (operators' pauses, models' drifts) apart.
type eventLog struct {
	mu     sync.Mutex
	byJob  map[string][]*events.Event
	all    []*events.Event
	routes []*events.RouteEvent
}

func follow(t *testing.T, js jetstream.JetStream, ns events.Namespace) *eventLog {
	t.Helper()
	l := &eventLog{byJob: map[string][]*events.Event{}}
	c, err := js.OrderedConsumer(context.Background(), ns.EventsStream(), jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	cc, err := c.Consume(func(msg jetstream.Msg) {
		if strings.Count(msg.Subject(), ".") == 2 { // <prefix>.events.<route>: a route's event
			ev, err := events.DecodeRouteEvent(msg.Data())
			if err != nil {
				t.Errorf("undecodable route event on %s: %v", msg.Subject(), err)
				return
			}
			require.Equal(t, ns.RouteEvent(ev.Route), msg.Subject(), "route event subject matches its route")
			l.mu.Lock()
			defer l.mu.Unlock()
			l.routes = append(l.routes, ev)
			return
		}
		ev, err := events.DecodeEvent(msg.Data())
		if err != nil {
			t.Errorf("undecodable event on %s: %v", msg.Subject(), err)
			return
		}
		require.Equal(t, ns.Event(ev.Route, ev.JobID), msg.Subject(), "event subject matches its route and job")
		l.mu.Lock()
		defer l.mu.Unlock()
		l.byJob[ev.JobID] = append(l.byJob[ev.JobID], ev)
		l.all = append(l.all, ev)
	})
	require.NoError(t, err)
	t.Cleanup(cc.Stop)
	return l
}

func (l *eventLog) jobs() map[string][]*events.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string][]*events.Event, len(l.byJob))
	for k, v := range l.byJob {
		out[k] = append([]*events.Event(nil), v...)
	}
	return out
}

// terminal returns each job's terminal events.
func (l *eventLog) terminal() map[string][]*events.Event {
	out := map[string][]*events.Event{}
	for id, evs := range l.jobs() {
		for _, ev := range evs {
			if ev.Type != events.EventRejected && ev.State.Terminal() && ev.Type == string(ev.State) {
				out[id] = append(out[id], ev)
			}
		}
	}
	return out
}

func (l *eventLog) rejections() []*events.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*events.Event
	for _, ev := range l.all {
		if ev.Type == events.EventRejected {
			out = append(out, ev)
		}
	}
	return out
}

func (e *env) publish(t *testing.T, subject string, v any) {
	t.Helper()
	var data []byte
	switch b := v.(type) {
	case []byte:
		data = b
	case string:
		data = []byte(b)
	default:
		var err error
		data, err = json.Marshal(v)
		require.NoError(t, err)
	}
	// As a client would, retry while the stream has no leader to answer
	// (a cluster electing one): a duplicate submission is deduplicated.
	var err error
	require.Eventually(t, func() bool {
		_, err = e.js.Publish(context.Background(), subject, data)
		return !errors.Is(err, jetstream.ErrNoStreamResponse) && !errors.Is(err, context.DeadlineExceeded)
	}, 30*time.Second, 250*time.Millisecond, "publish to %s: a stream leader to answer", subject)
	require.NoError(t, err)
}

func (e *env) streamMsgs(t *testing.T, s jetstream.Stream) uint64 {
	t.Helper()
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	return info.State.Msgs
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, timeout, 50*time.Millisecond, "waiting for %s", what)
}

// assertEventually polls cond until it holds or the timeout passes.
func assertEventually(cond func() bool, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// waitTerminal waits until every one of ids has a terminal event; when the
// timeout passes first it reports, for up to ten that have none, the job's
// record, its check message and the check consumers' state, so that a
// stuck job tells where it stuck.
func (e *env) waitTerminal(t *testing.T, ids []string, timeout time.Duration) {
	t.Helper()
	waitTerminal(t, e.js, e.log, ids, timeout)
}

// waitTerminal is env.waitTerminal for a fleet of processes on js.
func waitTerminal(t *testing.T, js jetstream.JetStream, log *eventLog, ids []string, timeout time.Duration) {
	t.Helper()
	if assertEventually(func() bool { return len(log.terminal()) >= len(ids) }, timeout) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := events.Default.Open(ctx, js)
	require.NoError(t, err)
	owner := jobs.New(events.Default, js, res, jobs.Config{})
	terminal := log.terminal()
	shown := 0
	for _, id := range ids {
		if _, ok := terminal[id]; ok {
			continue
		}
		if shown++; shown > 10 {
			break
		}
		j, err := owner.Get(ctx, id)
		if err != nil {
			t.Logf("unfinished %s: record: %v", id, err)
			continue
		}
		rec, _ := json.Marshal(j)
		t.Logf("unfinished %s: %s", id, rec)
		seen, err := owner.Check(ctx, j.Route, id)
		switch {
		case err != nil:
			t.Logf("  check: %v", err)
		case seen.Seq == 0:
			t.Logf("  no check message")
		default:
			c, _ := json.Marshal(seen.Check)
			t.Logf("  check seq %d published %s: %s", seen.Seq, seen.Published.Format(time.RFC3339Nano), c)
		}
		for _, ev := range log.jobs()[id] {
			t.Logf("  event %d %s %s at %s", ev.Seq, ev.Type, ev.State, ev.Time.Format(time.RFC3339Nano))
		}
	}
	for info := range res.Checks.ListConsumers(ctx).Info() {
		b, _ := json.Marshal(info)
		t.Logf("checks consumer: %s", b)
	}
	t.Fatalf("%d of %d jobs have no terminal event after %s", len(ids)-len(terminal), len(ids), timeout)
}
