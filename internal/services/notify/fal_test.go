package notify_test

import (
	"crypto/ed25519"
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
	"github.com/pollux-dev/pollux/pkg/signature"
	"github.com/pollux-dev/pollux/pkg/state"
)

// A fal face's submit with a webhook gets one delivery, at its end:
// fal's webhook body (the result as the face's result call answers it),
// signed as fal signs by the key of the current server secret, for the
// job's app as fal's user id; it verifies against the JWKS of the
// configured secrets with the verifier an app uses, pinned to its app,
// and not pinned to another.
func TestFalWebhooks(t *testing.T) {
	secrets(t)
	e := newEnv(t)
	oldKey, err := signature.ParseSecret(oldSecret)
	require.NoError(t, err)
	newKey, err := signature.ParseSecret(newSecret)
	require.NoError(t, err)
	jwks := signature.JWKS(signature.DeriveFalKey(oldKey).Public().(ed25519.PublicKey), signature.DeriveFalKey(newKey).Public().(ed25519.PublicKey))
	keys := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(jwks) }))
	t.Cleanup(keys.Close)
	mine, err := signature.NewFalVerifier(signature.FalVerifier{JWKSURL: keys.URL, UserID: "app-a"})
	require.NoError(t, err)
	others, err := signature.NewFalVerifier(signature.FalVerifier{JWKSURL: keys.URL, UserID: "app-b"})
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		hooks []faceshape.FalWebhook
		bad   []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if rid, err := mine.Verify(r.Context(), r.Header, body); err != nil || rid != "job" {
			bad = append(bad, "mine: "+rid+": "+err.Error())
		}
		if _, err := others.Verify(r.Context(), r.Header, body); err == nil {
			bad = append(bad, "verified for another app")
		}
		var h faceshape.FalWebhook
		if err := json.Unmarshal(body, &h); err != nil {
			bad = append(bad, "body: "+err.Error())
		}
		hooks = append(hooks, h)
	}))
	t.Cleanup(srv.Close)
	sub := endpoint("", true)
	e.run(config.Notify{Submissions: &sub}, nil, func(c *notify.Config) { c.KeepsOutputs = func(string) bool { return false } })

	md := map[string]string{faceshape.MetaFace: faceshape.FaceFal, faceshape.MetaFalApp: "acme/video", faceshape.MetaFalBase: "https://pollux.example/fal/r"}
	e.publishLife(t, func(st state.State) *state.Job {
		j := &state.Job{ID: "job", Route: "r", Model: "acme/video", State: st, RemoteID: "x", NotifyURL: srv.URL + "/hook", Metadata: md,
			SubmittedBy: "tok", App: "app-a", CreatedAt: time.Now().UTC()}
		if st == state.Succeeded {
			j.Outputs = []string{"https://cdn.example/out.mp4"}
		}
		return j
	})
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, bad)
	require.Len(t, hooks, 1, "fal calls a webhook once, at the end")
	require.Equal(t, "job", hooks[0].RequestID)
	require.Equal(t, "job", hooks[0].GatewayRequestID)
	require.Equal(t, faceshape.FalHookOK, hooks[0].Status)
	require.Nil(t, hooks[0].Error)
	require.Equal(t, map[string]any{"url": "https://cdn.example/out.mp4", "content_type": "video/mp4", "file_name": "out.mp4"},
		hooks[0].Payload.(map[string]any)["video"])
}
