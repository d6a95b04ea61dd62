package state_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/state"
)

// A completion is a job its provider finished; every ended job's polls
// count, and the webhook coverage is over the completions that expected
// a webhook.
func TestTally(t *testing.T) {
	t.Parallel()
	for st, completed := range map[state.State]bool{
		state.Succeeded: true, state.Failed: true,
		state.Canceled: false, state.Expired: false, state.Lost: false, state.Running: false,
	} {
		require.Equal(t, completed, st.Completed(), st)
	}
	var a, b state.Tally
	a.Add(state.Succeeded, 2, true, state.FromWebhook)
	a.Add(state.Failed, 3, true, state.FromPoll)
	a.Add(state.Lost, 5, true, state.FromPollux)
	b.Add(state.Canceled, 1, true, state.FromCancel)
	b.Add(state.Succeeded, 1, false, state.FromPoll)
	b.Add(state.Running, 7, false, "") // not ended: not counted
	a.Merge(b)
	require.Equal(t, state.Tally{Ended: 5, Polls: 12, Completions: 3, Expecting: 2, ByWebhook: 1, ByPoll: 1}, a)
	require.InDelta(t, 12.0/3, a.PollsPerCompletion(), 1e-9)
	require.InDelta(t, 0.5, a.WebhookCoverage(), 1e-9)
	require.Zero(t, state.Tally{}.WebhookCoverage())
	require.Zero(t, state.Tally{}.PollsPerCompletion())
}

// Polls per completion divides every ended job's polls by the
// completions (succeeded or failed), not by the jobs ended: a run's
// canceled, expired and lost jobs add their polls, not completions.
func TestPollsPerCompletion(t *testing.T) {
	t.Parallel()
	type end struct {
		state state.State
		polls int
	}
	for _, tc := range []struct {
		name string
		ends []end
		want float64
	}{
		{"completions only", []end{{state.Succeeded, 3}, {state.Failed, 1}}, 4.0 / 2},
		{"a canceled job's polls count, not the job", []end{{state.Succeeded, 3}, {state.Canceled, 3}}, 6.0 / 1},
		{"expired and lost alike", []end{{state.Succeeded, 2}, {state.Failed, 2}, {state.Expired, 4}, {state.Lost, 4}}, 12.0 / 2},
		{"ended without a completion", []end{{state.Canceled, 2}, {state.Expired, 1}}, 0},
		{"none ended", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var tl state.Tally
			for _, e := range tc.ends {
				tl.Add(e.state, e.polls, false, state.FromPoll)
			}
			require.InDelta(t, tc.want, tl.PollsPerCompletion(), 1e-9)
		})
	}
}
