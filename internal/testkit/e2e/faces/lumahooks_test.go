package faces_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/events"
)

// Luma generations created with a callback_url through the pinned lumaai
// SDK, the app never polling: every generation's callbacks reach the
// app's server (its secret in the URL), each the generation as the face
// answers it, in the order of its states — queued, dreaming, then the end
// its record has, last.
func TestLumaCallbacksSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fleet and node")
	}
	t.Parallel()
	s := start(t)
	s.fleet.Launch("webhook", "webhook")
	// The outbound webhook service copies the events published once it
	// runs: wait for it before the first create.
	e2etest.WaitFor(t, "the webhook service's copier", 30*time.Second, func() bool {
		_, err := s.JS.Consumer(t.Context(), events.Default.EventsStream(), events.Default.Prefix()+"-notify-copy")
		return err == nil
	})
	const jobs = 30
	lines := node(t, "luma.mjs", 90*time.Second, s.sdkEnv("MODE=callbacks", "ROUTE=video", "JOBS=30", "DEADLINE_S=60")...)
	order := map[string]int{"queued": 0, "dreaming": 1, "completed": 2, "failed": 2}
	created := map[string]bool{}
	got := map[string][]string{}
	for _, l := range lines {
		switch l["step"] {
		case "created":
			created[l["id"].(string)] = true
		case "callback":
			require.Equal(t, true, l["ours"], "%v", l)
			id := l["id"].(string)
			st := l["state"].(string)
			_, known := order[st]
			require.True(t, known, "%v", l)
			if prev := got[id]; len(prev) == 0 || prev[len(prev)-1] != st { // a redelivery repeats a state
				got[id] = append(got[id], st)
			}
		}
	}
	require.Len(t, created, jobs)
	succeeded := 0
	n := 0
	for _, states := range got {
		n += len(states)
	}
	t.Logf("luma callbacks: %d generations, %d callbacks (distinct states)", len(got), n)
	for id := range created {
		states := got[id]
		require.NotEmpty(t, states, "generation %s got no callback", id)
		require.Equal(t, "queued", states[0], "generation %s: taken, then on: %v", id, states)
		for i := 1; i < len(states); i++ {
			require.Less(t, order[states[i-1]], order[states[i]], "generation %s: states in order, the end last: %v", id, states)
		}
		j := s.record(t, id)
		want := map[string]string{"succeeded": "completed", "failed": "failed"}[string(j.State)]
		if j.State == "succeeded" {
			succeeded++
		}
		require.Equal(t, want, states[len(states)-1], "generation %s ends as its record: %v", id, states)
	}
	require.Greater(t, succeeded, jobs/2, "most generations ran (the model route's members run acme/video)")
}
