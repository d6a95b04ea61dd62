package dev_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// A process that runs ingest and the poller — pollux dev, pollux serve —
// has one set of gates, one pool of budget leases: every provider call it
// makes, ingest's creates and the poller's polls alike, goes through the
// gates its environment built (the one observer sees them all). Red when
// a service builds gates of its own: its calls are not seen.
func TestOneProcessHasOneSetOfGates(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[route.Op]int{}
	st, js := startStack(t, dev.StackConfig{
		Sim:        sim.Config{Seed: 9, TimeScale: 1, Default: sim.Model{QueueMedian: sim.Duration(50 * time.Millisecond), RunMedian: sim.Duration(300 * time.Millisecond)}},
		NoWebhooks: true,
		Calls: func(r string, op route.Op, class string, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			if r == dev.RouteName && class == "ok" {
				seen[op]++
			}
		},
	})
	b, err := json.Marshal(events.Submit{V: events.Version, ID: "gated", Model: "m/fast", Input: json.RawMessage(`{}`)})
	require.NoError(t, err)
	_, err = js.Publish(context.Background(), st.Env.NS.Submit(dev.RouteName), b)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		j, err := st.Env.Jobs.Get(context.Background(), "gated")
		return err == nil && j.State == state.Succeeded
	}, 30*time.Second, 20*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, seen[route.OpSubmit], "ingest's create went through the process's gates")
	require.Positive(t, seen[route.OpStatus], "the poller's polls went through the process's gates")
}
