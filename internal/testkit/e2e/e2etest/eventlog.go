package e2etest

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/pkg/events"
)

// EventLog collects every job event in stream order, and the routes'
// events (operators' pauses, models' drifts) apart.
type EventLog struct {
	mu     sync.Mutex
	byJob  map[string][]*events.Event
	all    []*events.Event
	routes []*events.RouteEvent
}

// Follow follows the events stream of namespace ns until the test ends.
func Follow(t *testing.T, js jetstream.JetStream, ns events.Namespace) *EventLog {
	t.Helper()
	l := &EventLog{byJob: map[string][]*events.Event{}}
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

// Jobs returns each job's events so far, in stream order.
func (l *EventLog) Jobs() map[string][]*events.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string][]*events.Event, len(l.byJob))
	for k, v := range l.byJob {
		out[k] = append([]*events.Event(nil), v...)
	}
	return out
}

// All returns every job event so far, in stream order.
func (l *EventLog) All() []*events.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*events.Event(nil), l.all...)
}

// Terminal returns each job's terminal events.
func (l *EventLog) Terminal() map[string][]*events.Event {
	out := map[string][]*events.Event{}
	for id, evs := range l.Jobs() {
		for _, ev := range evs {
			if ev.Type != events.EventRejected && ev.State.Terminal() && ev.Type == string(ev.State) {
				out[id] = append(out[id], ev)
			}
		}
	}
	return out
}

// Rejections returns the rejected events so far, in stream order.
func (l *EventLog) Rejections() []*events.Event {
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

// WaitFor fails the test unless cond holds within timeout.
func WaitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, timeout, 50*time.Millisecond, "waiting for %s", what)
}

// Eventually polls cond until it holds or the timeout passes, and reports
// whether it held.
func Eventually(cond func() bool, timeout time.Duration) bool {
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

// WaitTerminal is Env.WaitTerminal for a fleet of processes on js.
func WaitTerminal(t *testing.T, js jetstream.JetStream, log *EventLog, ids []string, timeout time.Duration) {
	t.Helper()
	if Eventually(func() bool { return len(log.Terminal()) >= len(ids) }, timeout) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := events.Default.Open(ctx, js)
	require.NoError(t, err)
	owner := jobs.New(events.Default, js, res, jobs.Config{})
	terminal := log.Terminal()
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
			t.Logf("  check seq %d published %s (parked %v): %s", seen.Seq, seen.Published.Format(time.RFC3339Nano), seen.Parked, c)
		}
		for _, ev := range log.Jobs()[id] {
			t.Logf("  event %d %s %s at %s", ev.Seq, ev.Type, ev.State, ev.Time.Format(time.RFC3339Nano))
		}
	}
	for info := range res.Checks.ListConsumers(ctx).Info() {
		b, _ := json.Marshal(info)
		t.Logf("checks consumer: %s", b)
	}
	t.Fatalf("%d of %d jobs have no terminal event after %s", len(ids)-len(terminal), len(ids), timeout)
}
