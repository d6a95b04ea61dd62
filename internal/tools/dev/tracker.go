package dev

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/internal/wiring/app"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// tracker follows the demo's jobs through their events, as any client would.
type tracker struct {
	cons jetstream.ConsumeContext

	mu     sync.Mutex
	states map[string]state.State
	done   int
}

func newTracker(ctx context.Context, env *app.Env, run string) (*tracker, error) {
	c, err := env.JS.OrderedConsumer(ctx, env.NS.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{env.NS.Event(RouteName, "*")},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("follow events: %w", err)
	}
	t := &tracker{states: map[string]state.State{}}
	t.cons, err = c.Consume(func(msg jetstream.Msg) {
		ev, err := events.DecodeEvent(msg.Data())
		if err != nil || ev.Job == nil || ev.Job.Metadata["run"] != run {
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		prev, seen := t.states[ev.JobID]
		if seen && prev.Terminal() {
			return
		}
		if ev.State.Valid() {
			t.states[ev.JobID] = ev.State
			if ev.State.Terminal() {
				t.done++
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("follow events: %w", err)
	}
	return t, nil
}

func (t *tracker) snapshot() (counts map[state.State]int, done int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	counts = map[state.State]int{}
	for _, s := range t.states {
		counts[s]++
	}
	return counts, t.done
}

// wait shows progress until every job is terminal, the timeout passes or
// ctx ends.
func (t *tracker) wait(ctx context.Context, cfg Config, w *workload, start time.Time) error {
	defer t.cons.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(cfg.Timeout)
	defer deadline.Stop()
	// On a terminal the line refreshes in place; elsewhere a line is
	// written every few seconds.
	every, end := 5*time.Second, "\n"
	if cfg.ProgressInPlace {
		every, end = 250*time.Millisecond, ""
	}
	last := time.Time{}
	for {
		counts, done := t.snapshot()
		finished := done >= cfg.Jobs
		if finished || time.Since(last) >= every {
			line := fmt.Sprintf("  %5.1fs  submitted %d/%d · queued %d · running %d · finished %d (succeeded %d, failed %d, lost %d, expired %d)",
				time.Since(start).Seconds(), w.accepted.Load(), cfg.Jobs, counts[state.Queued], counts[state.Running], done,
				counts[state.Succeeded], counts[state.Failed], counts[state.Lost], counts[state.Expired])
			if cfg.ProgressInPlace {
				line = "\r\033[K" + line
			}
			fmt.Fprint(cfg.Progress, line+end)
			last = time.Now()
		}
		if finished {
			if cfg.ProgressInPlace {
				fmt.Fprintln(cfg.Progress)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: interrupted with %d of %d finished", ErrIncomplete, done, cfg.Jobs)
		case <-deadline.C:
			return fmt.Errorf("%w: %d of %d finished within %s", ErrIncomplete, done, cfg.Jobs, cfg.Timeout)
		case <-tick.C:
		}
	}
}
