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
	"github.com/pollux-dev/pollux/pkg/signature"
	"github.com/pollux-dev/pollux/pkg/state"
)

// A Replicate face's create with a webhook gets the prediction, only for
// the events its filter asked for, signed with the submitting token's
// own secret (derived from each server secret of a rotation: the new
// one's verifies), not the endpoint's.
func TestReplicateWebhooks(t *testing.T) {
	secrets(t)
	e := newEnv(t)
	newKey, err := signature.ParseSecret(newSecret)
	require.NoError(t, err)
	mine, err := signature.NewVerifier(signature.FormatSecret(signature.DeriveSecret(newKey, "app-a")))
	require.NoError(t, err)
	others, err := signature.NewVerifier(signature.FormatSecret(signature.DeriveSecret(newKey, "app-b")), newSecret)
	require.NoError(t, err)
	type got struct {
		Status string               `json:"status"`
		Output any                  `json:"output"`
		URLs   struct{ Get string } `json:"urls"`
	}
	var (
		mu    sync.Mutex
		preds []got
		bad   []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if _, err := mine.Verify(r.Header, body); err != nil {
			bad = append(bad, "mine: "+err.Error())
		}
		if _, err := others.Verify(r.Header, body); err == nil {
			bad = append(bad, "verified with another token's or the endpoint's secret")
		}
		var p got
		if err := json.Unmarshal(body, &p); err != nil {
			bad = append(bad, "body: "+err.Error())
		}
		preds = append(preds, p)
	}))
	t.Cleanup(srv.Close)
	sub := endpoint("", true)
	e.run(config.Notify{Submissions: &sub}, nil, func(c *notify.Config) { c.KeepsOutputs = func(string) bool { return false } })

	base := "https://pollux.example/replicate/r"
	md := map[string]string{faceshape.MetaFace: faceshape.FaceReplicate, faceshape.MetaReplicateBase: base,
		faceshape.MetaReplicateWebhookEvent: "start,completed"}
	for seq, step := range []struct {
		typ string
		st  state.State
	}{{events.EventSubmitted, state.Queued}, {events.EventRunning, state.Running}, {events.EventProgress, state.Running}, {events.EventSucceeded, state.Succeeded}} {
		j := &state.Job{ID: "job", Route: "r", Model: "m", State: step.st, NotifyURL: srv.URL + "/hook", Metadata: md,
			SubmittedBy: "app-a", CreatedAt: time.Now().UTC()}
		if step.st == state.Succeeded {
			j.Outputs = []string{"https://cdn.example/out.mp4"}
		}
		ev := events.Event{V: events.Version, Type: step.typ, Seq: uint64(seq + 1), Time: time.Now().UTC(), Route: "r", JobID: "job", State: step.st, Job: j}
		b, err := ev.Encode()
		require.NoError(t, err)
		_, err = e.js.Publish(t.Context(), events.Default.Event("r", "job"), b, jetstream.WithMsgID(events.MsgID("job", uint64(seq+1))))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		ds, err := events.OutboxDeliveries(t.Context(), e.js, events.Default, "job")
		return err == nil && len(ds) == 1 && ds[0].State == events.OutboxDelivered && ds[0].Delivered == 4
	}, 20*time.Second, 20*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, bad)
	require.Len(t, preds, 2, "start and completed only: running and progress are logs, which the filter left out")
	require.Equal(t, "starting", preds[0].Status)
	require.Equal(t, "succeeded", preds[1].Status)
	require.Equal(t, "https://cdn.example/out.mp4", preds[1].Output)
	require.Equal(t, base+"/v1/predictions/job", preds[1].URLs.Get)
}
