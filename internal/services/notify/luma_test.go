package notify_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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
	for seq, step := range []struct {
		typ string
		st  state.State
	}{{events.EventSubmitted, state.Queued}, {events.EventQueued, state.Queued}, {events.EventRunning, state.Running},
		{events.EventProgress, state.Running}, {events.EventSucceeded, state.Succeeded}} {
		j := &state.Job{ID: "gen", Route: "r", Model: "ray-2", State: step.st, NotifyURL: srv.URL + "/hook?secret=s3", Metadata: md,
			SubmittedBy: "app-a", CreatedAt: time.Now().UTC()}
		if step.st == state.Succeeded {
			j.Outputs = []string{"https://cdn.example/out.mp4"}
		}
		ev := events.Event{V: events.Version, Type: step.typ, Seq: uint64(seq + 1), Time: time.Now().UTC(), Route: "r", JobID: "gen", State: step.st, Job: j}
		b, err := ev.Encode()
		require.NoError(t, err)
		_, err = e.js.Publish(t.Context(), events.Default.Event("r", "gen"), b, jetstream.WithMsgID(events.MsgID("gen", uint64(seq+1))))
		require.NoError(t, err)
	}
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
