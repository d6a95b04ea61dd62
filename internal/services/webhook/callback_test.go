package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/webhook"
	"github.com/pollux-dev/pollux/internal/testkit/stack"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/generic"
	"github.com/pollux-dev/pollux/pkg/state"
)

// lumaLike is a generic route whose provider sends unsigned callbacks.
const lumaLike = `{
  "base_url": "https://provider.invalid/v1",
  "submit": {"path": "/generations", "model_field": "model", "id_path": "id"},
  "status": {"path": "/generations/{id}", "state_path": "state"},
  "states": {"queued": "queued", "dreaming": "running", "completed": "succeeded", "failed": "failed"},
  "callback": {"url_field": "callback_url", "id_path": "id"}
}`

// Unsigned callbacks are hints: with a good token a callback claiming the
// job completed changes no state and brings the job's status check forward
// to now; a bad token is refused.
func TestUnsignedCallbacksAreHints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stack.New(t, stack.Config{})
	js, res, owner := st.JS, st.Res, st.Jobs
	a, err := generic.New(provider.Config{Route: "luma", Kind: generic.Kind, Token: "t", Options: json.RawMessage(lumaLike)})
	require.NoError(t, err)
	rt, err := route.New("luma", a, config.Route{WebhookURL: "https://hooks.example/webhooks/luma"}, 1)
	require.NoError(t, err)
	require.NotNil(t, rt.Callbacks)
	rt.CallbackSecret = []byte("0123456789abcdef-callback-secret")
	u := rt.JobWebhookURL("job-1")
	require.Contains(t, u, "token=")

	later := time.Now().Add(time.Hour).UTC()
	track(t, owner, &state.Job{ID: "job-1", Route: "luma", RemoteID: "gen-9", State: state.Running, WebhookExpected: true, NextCheckAt: later})
	rev := revision(t, res, "job-1")

	svc, err := webhook.New(webhook.Config{Routes: map[string]*route.Route{"luma": rt}}, js, events.Default, res, owner.Webhooks())
	require.NoError(t, err)
	hs := httptest.NewServer(svc.Handler())
	defer hs.Close()
	post := func(query string, body string) int {
		resp, err := http.Post(hs.URL+"/webhooks/luma?"+query, "application/json", bytes.NewReader([]byte(body)))
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	claim := `{"id":"gen-9","state":"completed","assets":{"video":"https://x/v.mp4"}}`
	require.Equal(t, http.StatusUnauthorized, post("job=job-1&token=forged", claim))
	require.Equal(t, http.StatusUnauthorized, post("job=job-1", claim), "the token is required when the route has a secret")
	require.Equal(t, http.StatusBadRequest, post("job=job-1&token="+rt.CallbackToken("job-1"), `{"state":"completed"}`), "no id")
	require.Equal(t, http.StatusOK, post("job=job-1&token="+rt.CallbackToken("job-1"), claim))

	// Apply the stored hint as the service's consumer would.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error)
	ln := listenLocal(t)
	go func() { done <- svc.Run(cctx, ln) }()
	require.Eventually(t, func() bool {
		v, err := owner.Check(ctx, "luma", "job-1")
		return err == nil && v.Check != nil && !v.Check.Due.After(time.Now())
	}, 10*time.Second, 20*time.Millisecond, "the check is brought forward: due now")
	cur, err := owner.Get(ctx, "job-1")
	require.NoError(t, err)
	require.Equal(t, state.Running, cur.State, "a callback alone never moves a job")
	require.Equal(t, rev, revision(t, res, "job-1"), "nor writes its record")
	cancel()
	require.NoError(t, <-done)
}

// track has owner track job (a job with a remote id), armed at its
// NextCheckAt.
func track(t *testing.T, owner *jobs.Owner, j *state.Job) {
	t.Helper()
	j.CreatedAt = time.Now().UTC()
	_, created, err := owner.Intake().Accept(context.Background(), j)
	require.NoError(t, err)
	require.True(t, created)
}

// revision is a job record's revision.
func revision(t *testing.T, res *events.Resources, id string) uint64 {
	t.Helper()
	e, err := res.Jobs.Get(context.Background(), id)
	require.NoError(t, err)
	return e.Revision()
}

func listenLocal(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return ln
}

// The generic adapter passes the job's callback URL in the submit body.
func TestGenericSubmitGivesTheCallbackURL(t *testing.T) {
	t.Parallel()
	var got map[string]any
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.NoError(t, json.NewDecoder(r.Body).Decode(&got))
		_, _ = w.Write([]byte(`{"id":"gen-1","state":"queued"}`))
	}))
	defer fake.Close()
	opts := bytes.Replace([]byte(lumaLike), []byte("https://provider.invalid/v1"), []byte(fake.URL), 1)
	a, err := generic.New(provider.Config{Route: "luma", Kind: generic.Kind, Token: "t", Options: opts})
	require.NoError(t, err)
	st, err := a.Submit(context.Background(), provider.SubmitRequest{Model: "ray-2", Input: json.RawMessage(`{"prompt":"p"}`),
		WebhookURL: "https://hooks.example/webhooks/luma?job=j&token=t0k"})
	require.NoError(t, err)
	require.Equal(t, "gen-1", st.RemoteID)
	require.Equal(t, "https://hooks.example/webhooks/luma?job=j&token=t0k", got["callback_url"])
	require.Equal(t, "ray-2", got["model"])
}
