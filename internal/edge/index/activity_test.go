package index_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/index"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Activity sums the last hour's ends per minute from the terminal events,
// each job's end once; a completion is a job its provider finished
// (succeeded or failed): a canceled or expired job is ended, not
// completed, and weighs in neither the webhook coverage nor the detection
// delay.
func TestActivity(t *testing.T) {
	t.Parallel()
	e := setup(t)
	now := t0.Add(30*time.Minute + 30*time.Second)
	x := e.start(index.Config{Now: func() time.Time { return now }})

	// end publishes the terminal event of a job ending at `at`, detected
	// `delay` later by `by` after `polls` polls.
	end := func(route, id string, st state.State, at time.Time, delay time.Duration, by state.Source, polls int, seq uint64) {
		j := job(route, id, t0.Add(-time.Hour), st)
		j.CompletedAt, j.DetectedAt, j.DetectedBy, j.Polls = at, at.Add(delay), by, polls
		j.WebhookExpected = route == "a"
		j.UpdatedAt = at.Add(delay)
		e.publish(j, seq)
	}
	e.publish(job("a", "j1", t0.Add(-time.Hour), state.Running), 1)
	end("a", "j1", state.Succeeded, t0.Add(29*time.Minute+10*time.Second), 2*time.Second, state.FromPoll, 3, 2)
	end("a", "j1", state.Succeeded, t0.Add(29*time.Minute+10*time.Second), 2*time.Second, state.FromPoll, 4, 3) // a late poll: not a second end
	end("a", "j2", state.Failed, t0.Add(29*time.Minute+20*time.Second), 4*time.Second, state.FromWebhook, 5, 1)
	end("a", "j3", state.Succeeded, t0.Add(30*time.Minute), time.Second, state.FromWebhook, 1, 1)
	end("a", "j4", state.Canceled, t0.Add(30*time.Minute+5*time.Second), 3*time.Second, state.FromCancel, 2, 1)
	end("a", "old", state.Succeeded, t0.Add(-2*time.Hour), time.Second, state.FromPoll, 9, 1) // before the hour
	end("b", "k1", state.Expired, t0.Add(time.Minute), 10*time.Second, state.FromPollux, 6, 1)
	e.caughtUp(x)

	a := x.Activity("a")
	require.Equal(t, "a", a.Route)
	require.Len(t, a.Minutes, 60)
	require.Equal(t, t0.Add(-29*time.Minute), a.Minutes[0].Start)
	require.Equal(t, index.Minute{Start: t0.Add(29 * time.Minute), Ended: 2, Completions: 2, Failures: 1, Polls: 8, WebhookExpected: 2, ByWebhook: 1, DetectP50: 2, DetectP95: 4}, a.Minutes[58])
	require.Equal(t, index.Minute{Start: t0.Add(30 * time.Minute), Ended: 2, Completions: 1, Polls: 3, WebhookExpected: 1, ByWebhook: 1, DetectP50: 1, DetectP95: 1}, a.Minutes[59],
		"the canceled job is ended, not completed")
	require.Equal(t, 4, a.Ended)
	require.Equal(t, 3, a.Completions)
	require.InDelta(t, 11.0/3, a.PollsPerCompletion, 1e-9, "every ended job's polls over the completions: the canceled job's polls count, not the job")
	require.Equal(t, 3, a.WebhookExpected)
	require.InDelta(t, 2.0/3, a.WebhookCoverage, 1e-9)
	require.Equal(t, 2.0, a.DetectP50)
	require.Equal(t, 4.0, a.DetectP95)

	all := x.Activity("")
	require.Equal(t, 5, all.Ended)
	require.Equal(t, 3, all.Completions)
	require.Equal(t, index.Minute{Start: t0.Add(time.Minute), Ended: 1, Failures: 1, Polls: 6}, all.Minutes[30], "expired: ended, failed, not completed")
	require.Equal(t, 4.0, all.DetectP95)
	require.InDelta(t, 2.0/3, all.WebhookCoverage, 1e-9, "the poll-only route's jobs do not dilute it")

	none := x.Activity("nope")
	require.Len(t, none.Minutes, 60)
	require.Zero(t, none.Completions)
	require.Zero(t, none.PollsPerCompletion)

	// An hour later the figures have aged out.
	now = now.Add(time.Hour)
	require.Zero(t, x.Activity("a").Ended)
}
