package polluxtest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/pollux-dev/pollux/pkg/client"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
	"github.com/pollux-dev/pollux/polluxtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A user's test against a provider that misbehaves: rate limits, 5xx,
// webhooks that never come, predictions that fail. Every job ends as the
// provider's ground truth says, each created once, and the fleet stops
// with the test, leaving no goroutine behind (TestMain).
func TestFleetUnderFaults(t *testing.T) {
	t.Parallel()
	f := polluxtest.Start(t, polluxtest.Config{Sim: sim.Config{TimeScale: 50, Seed: 11,
		Default: sim.Model{FailRate: 0.2},
		Faults:  sim.Faults{RateLimitRate: 0.02, RetryAfter: sim.Duration(time.Second), ServerErrorRate: 0.05, WebhookMissingRate: 0.3}}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const n = 20
	jobs := make([]client.Job, n)
	for i := range jobs {
		var err error
		jobs[i], err = f.Client.Submit(ctx, f.Route, events.Submit{Model: "owner/model", IdempotencyKey: fmt.Sprintf("job-%02d", i)})
		require.NoError(t, err)
	}
	ended := map[state.State]int{}
	for _, job := range jobs {
		final, err := f.Client.Wait(ctx, job)
		require.NoError(t, err)
		ended[final.State]++
		truth := prediction(t, f, final.Job.RemoteID)
		require.Equal(t, truth.Status, string(final.State), "job %s ends as the provider says", job.ID)
	}
	require.Equal(t, n, ended[state.Succeeded]+ended[state.Failed], "%v", ended)
	st := f.Sim.Stats()
	require.Equal(t, n, st.IdempotencyKeys)
	require.Equal(t, 1, st.MaxCreatesPerKey, "each job created once")
}

func prediction(t *testing.T, f *polluxtest.Fleet, id string) sim.Prediction {
	t.Helper()
	for _, p := range f.Sim.Predictions() {
		if p.ID == id {
			return p
		}
	}
	t.Fatalf("the provider has no prediction %s", id)
	return sim.Prediction{}
}
