package dev_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/replicate"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// A job expired at its deadline is canceled at the provider — counted by
// the simulated provider itself — unless the route's cancel_on_deadline
// is false.
func TestCancelOnDeadlineIsARouteSetting(t *testing.T) {
	t.Parallel()
	no := false
	for name, tc := range map[string]struct {
		cancel  *bool
		cancels int
	}{
		"default": {nil, 3},
		"off":     {&no, 0},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, js := startStack(t, dev.StackConfig{
				Sim: sim.Config{Seed: 3, TimeScale: 1,
					Default: sim.Model{QueueMedian: sim.Duration(100 * time.Millisecond), RunMedian: sim.Duration(time.Hour)}},
				Route:      config.Route{CancelOnDeadline: tc.cancel},
				NoWebhooks: true,
			})
			// Jobs created at the provider without a deadline of its own
			// (a submission would hand it the deadline, and the provider
			// would stop the job itself), then tracked with one.
			direct, err := replicate.New(provider.Config{Route: "direct", Kind: replicate.Kind, BaseURL: st.SimURL, Token: st.SimToken})
			require.NoError(t, err)
			ids := make([]string, 3)
			for i := range ids {
				created, err := direct.Submit(ctx, provider.SubmitRequest{JobID: "x", Model: "m/slow", Input: json.RawMessage(`{}`)})
				require.NoError(t, err)
				ids[i] = fmt.Sprintf("late-%d", i)
				msg, err := json.Marshal(events.Track{V: events.Version, ID: ids[i], RemoteID: created.RemoteID, Model: "m/slow", TimeoutS: 1})
				require.NoError(t, err)
				_, err = js.Publish(ctx, st.Env.NS.Track(dev.RouteName), msg)
				require.NoError(t, err)
			}
			require.Eventually(t, func() bool {
				for _, id := range ids {
					j, err := st.Env.Jobs.Get(ctx, id)
					if err != nil || j.State != state.Expired {
						return false
					}
				}
				return true
			}, time.Minute, 50*time.Millisecond, "every job expires at its deadline")
			// Every expired job's cancel is accounted for by outcome, the
			// route's setting deciding; the provider counts the calls.
			outcome := "canceled"
			if tc.cancel != nil {
				outcome = "off"
			}
			require.Eventually(t, func() bool {
				return deadlineCancels(t, st, outcome) == float64(len(ids))
			}, 30*time.Second, 50*time.Millisecond, "every expired job's cancel %s", outcome)
			require.Equal(t, tc.cancels, st.Sim.Stats().CancelCalls, "cancels asked at the provider")
		})
	}
}

// deadlineCancels reads pollux_deadline_cancels_total for the stack's route
// and one outcome.
func deadlineCancels(t *testing.T, st *dev.Stack, outcome string) float64 {
	t.Helper()
	mfs, err := st.Metrics.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "pollux_deadline_cancels_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] == dev.RouteName && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
