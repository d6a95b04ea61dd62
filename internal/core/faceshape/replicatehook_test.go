package faceshape_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/faceshape"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// A filter is checked and kept in Replicate's order; none means all.
func TestReplicateFilter(t *testing.T) {
	t.Parallel()
	got, err := faceshape.ReplicateFilter(nil)
	require.NoError(t, err)
	require.Equal(t, "start,output,logs,completed", got)
	got, err = faceshape.ReplicateFilter([]string{"completed", "logs", "completed"})
	require.NoError(t, err)
	require.Equal(t, "logs,completed", got)
	_, err = faceshape.ReplicateFilter([]string{"done"})
	require.ErrorContains(t, err, `"done" is not one of`)
	_, err = faceshape.ReplicateFilter([]string{"start", "start", "start", "start", "start"})
	require.ErrorContains(t, err, "at most 4")
}

// Which job events a webhook gets, by its filter.
func TestReplicateWants(t *testing.T) {
	t.Parallel()
	job := func(filter string) *state.Job {
		return &state.Job{Metadata: map[string]string{faceshape.MetaFace: faceshape.FaceReplicate, faceshape.MetaReplicateWebhookEvent: filter}}
	}
	all := []string{events.EventWaiting, events.EventSubmitted, events.EventQueued, events.EventRunning, events.EventProgress,
		events.EventSucceeded, events.EventFailed, events.EventCanceled, events.EventExpired, events.EventLost,
		events.EventOutputsSaved, events.EventOutputsExpiring}
	for filter, want := range map[string][]string{
		"completed":                   {events.EventSucceeded, events.EventFailed, events.EventCanceled, events.EventExpired, events.EventLost},
		"output":                      {events.EventSucceeded},
		"start":                       {events.EventSubmitted},
		"logs":                        {events.EventQueued, events.EventRunning, events.EventProgress},
		"start,output,logs,completed": {events.EventSubmitted, events.EventQueued, events.EventRunning, events.EventProgress, events.EventSucceeded, events.EventFailed, events.EventCanceled, events.EventExpired, events.EventLost},
	} {
		var got []string
		for _, typ := range all {
			if faceshape.ReplicateWants(job(filter), typ) {
				got = append(got, typ)
			}
		}
		require.Equal(t, want, got, filter)
	}
	require.True(t, faceshape.ReplicateHook(job("completed")))
	require.False(t, faceshape.ReplicateHook(&state.Job{Metadata: map[string]string{faceshape.MetaFace: faceshape.FaceReplicate}}), "no webhook")
	require.False(t, faceshape.ReplicateHook(nil))
}
