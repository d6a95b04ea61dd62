package poller

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// A hedge's id is derived from its job's, one per job, and is a valid id
// however long the job's is.
func TestHedgeID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ id, want string }{
		{"job-1", "job-1-h"},
		{strings.Repeat("a", 126), strings.Repeat("a", 126) + "-h"},
	} {
		require.Equal(t, tc.want, hedgeID(tc.id))
	}
	long := hedgeID(strings.Repeat("a", 127))
	require.True(t, strings.HasPrefix(long, "hedge-"), long)
	require.True(t, events.ValidToken(long), long)
	require.NotEqual(t, long, hedgeID(strings.Repeat("a", 128)), "distinct jobs, distinct hedges")
	require.Equal(t, long, hedgeID(strings.Repeat("a", 127)), "one job, one hedge")
}

// A job whose hedge succeeded ends succeeded with the hedge's outputs,
// detected by the hedge.
func TestAdoptTakesTheHedgesResult(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	h := &state.Job{ID: "j-h", Route: "b", State: state.Succeeded, Outputs: []string{"https://out/1"}, CompletedAt: now.Add(-time.Second)}
	obs := adopt(h, now)
	require.Equal(t, state.Succeeded, obs.State)
	require.Equal(t, state.FromHedge, obs.Source)
	require.Equal(t, h.Outputs, obs.Outputs)
	require.Equal(t, h.CompletedAt, obs.CompletedAt)
	require.Contains(t, obs.Reason, "j-h")
}
