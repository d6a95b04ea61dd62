package faceshape_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/faceshape"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

func falJob(st state.State) *state.Job {
	return &state.Job{ID: "123e4567-e89b-42d3-a456-426614174000", Route: "sim", State: st, RemoteID: "r1", App: "app",
		NotifyURL: "https://app.example/hook",
		Outputs:   []string{"https://cdn.example/out/v.mp4", "https://cdn.example/out/poster.png"},
		Metadata:  map[string]string{faceshape.MetaFace: faceshape.FaceFal, faceshape.MetaFalApp: "acme/video", faceshape.MetaFalBase: "https://pollux.example/fal/sim"}}
}

// A succeeded request's delivery is OK with its result as the result call
// answers it (output URLs Pollux's own on a route that keeps them); an
// ended one's is ERROR with the result call's error body and fal's error
// line.
func TestFalWebhookBody(t *testing.T) {
	t.Parallel()
	b, err := faceshape.FalWebhookBody(falJob(state.Succeeded), false)
	require.NoError(t, err)
	require.JSONEq(t, `{"request_id":"123e4567-e89b-42d3-a456-426614174000","gateway_request_id":"123e4567-e89b-42d3-a456-426614174000","status":"OK",
		"payload":{"video":{"url":"https://cdn.example/out/v.mp4","content_type":"video/mp4","file_name":"v.mp4"},
		"images":[{"url":"https://cdn.example/out/poster.png","content_type":"image/png","file_name":"poster.png"}],
		"files":[{"url":"https://cdn.example/out/v.mp4","content_type":"video/mp4","file_name":"v.mp4"},{"url":"https://cdn.example/out/poster.png","content_type":"image/png","file_name":"poster.png"}]}}`, string(b))
	b, err = faceshape.FalWebhookBody(falJob(state.Succeeded), true)
	require.NoError(t, err)
	require.Contains(t, string(b), `"url":"https://pollux.example/fal/sim/outputs/123e4567-e89b-42d3-a456-426614174000/0"`)

	j := falJob(state.Failed)
	j.Reason = "the model crashed"
	b, err = faceshape.FalWebhookBody(j, false)
	require.NoError(t, err)
	require.JSONEq(t, `{"request_id":"123e4567-e89b-42d3-a456-426614174000","gateway_request_id":"123e4567-e89b-42d3-a456-426614174000","status":"ERROR",
		"error":"Invalid status code: 500","payload":{"detail":"the model crashed","error_type":"runner_server_error","message":"the model crashed"}}`, string(b))
	j.RemoteID = "" // refused at create: fal's validation error
	b, err = faceshape.FalWebhookBody(j, false)
	require.NoError(t, err)
	require.JSONEq(t, `{"request_id":"123e4567-e89b-42d3-a456-426614174000","gateway_request_id":"123e4567-e89b-42d3-a456-426614174000","status":"ERROR",
		"error":"Invalid status code: 422","payload":{"detail":[{"loc":["body"],"msg":"the model crashed","type":"value_error"}],"message":"the model crashed"}}`, string(b))
}

// Only a fal face job with a webhook is a fal hook; only its end is
// delivered; its user id is its app's.
func TestFalHook(t *testing.T) {
	t.Parallel()
	j := falJob(state.Running)
	require.True(t, faceshape.FalHook(j))
	require.Equal(t, "app", faceshape.FalUserID(j))
	j.App = ""
	require.Equal(t, faceshape.FalNoApp, faceshape.FalUserID(j))
	noBase := falJob(state.Running)
	delete(noBase.Metadata, faceshape.MetaFalBase)
	require.False(t, faceshape.FalHook(noBase))
	other := falJob(state.Running)
	other.Metadata[faceshape.MetaFace] = faceshape.FaceReplicate
	require.False(t, faceshape.FalHook(other))
	noURL := falJob(state.Running)
	noURL.NotifyURL = ""
	require.False(t, faceshape.FalHook(noURL))
	require.False(t, faceshape.FalHook(nil))
	for _, typ := range []string{events.EventSucceeded, events.EventFailed, events.EventCanceled, events.EventExpired, events.EventLost} {
		require.True(t, faceshape.FalWants(typ), typ)
	}
	for _, typ := range []string{events.EventWaiting, events.EventSubmitted, events.EventQueued, events.EventRunning, events.EventProgress, events.EventRejected} {
		require.False(t, faceshape.FalWants(typ), typ)
	}
}
