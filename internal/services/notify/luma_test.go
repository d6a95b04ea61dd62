package notify_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/faceshape"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/notify"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// A Luma face's create with a callback_url gets the generation as the
// face answers it, on each change of its state — queued, dreaming,
// completed — and nothing for a progress event, the ended one last.
func TestLumaCallbacks(t *testing.T) {
	secrets(t)
	e := newEnv(t)
	var (
		mu   sync.Mutex
		gens []faceshape.LumaGeneration
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var g faceshape.LumaGeneration
		mu.Lock()
		defer mu.Unlock()
		if err := json.Unmarshal(body, &g); err != nil {
			g.ID = "unreadable: " + string(body)
		}
		gens = append(gens, g)
	}))
	t.Cleanup(srv.Close)
	sub := endpoint("", true)
	e.run(config.Notify{Submissions: &sub}, nil, func(c *notify.Config) { c.KeepsOutputs = func(string) bool { return false } })

	md := map[string]string{faceshape.MetaFace: faceshape.FaceLuma, faceshape.MetaLumaBase: "https://pollux.example/luma/r",
		faceshape.MetaLumaModel: "ray-2", faceshape.MetaLumaType: "video"}
	e.publishSteps("r", "gen", []step{{events.EventSubmitted, state.Queued}, {events.EventQueued, state.Queued}, {events.EventRunning, state.Running},
		{events.EventProgress, state.Running}, {events.EventSucceeded, state.Succeeded}}, func(s step) *state.Job {
		return &state.Job{ID: "gen", Route: "r", Model: "ray-2", State: s.st, NotifyURL: srv.URL + "/hook?secret=s3", Metadata: md,
			SubmittedBy: "app-a", CreatedAt: time.Now().UTC()}
	})
	require.Eventually(t, func() bool {
		ds, err := events.OutboxDeliveries(t.Context(), e.js, events.Default, "gen")
		return err == nil && len(ds) == 1 && ds[0].State == events.OutboxDelivered && ds[0].Delivered == 5
	}, 20*time.Second, 20*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, gens, 3)
	var states []string
	for _, g := range gens {
		require.Equal(t, "gen", g.ID)
		require.Equal(t, "ray-2", g.Model)
		states = append(states, g.State)
	}
	require.Equal(t, []string{"queued", "dreaming", "completed"}, states, "each state change once, the ended one last")
	require.Equal(t, "https://cdn.example/out.mp4", gens[2].Assets.Video)
}
