package replicate_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/faceshape"
	"github.com/pollux-dev/pollux/internal/edge/face"
)

const hookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// A create's webhook and filter are checked, then recorded on the job: the
// URL as its notify_url, the filter and the face's URL in its metadata.
func TestCreateWithWebhook(t *testing.T) {
	t.Parallel()
	p, srv := setup(t)
	p.SetWebhooks(&face.Webhooks{Secret: hookSecret})
	resp, body := do(t, srv, http.MethodPost, "/v1/models/acme/video/predictions",
		`{"input":{},"webhook":"https://app.example/hook","webhook_events_filter":["completed","start"]}`, nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	resp, body = do(t, srv, http.MethodPost, "/v1/models/acme/video/predictions", `{"input":{},"webhook":"https://app.example/all"}`, nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	subs := p.Submissions()
	require.Len(t, subs, 2)
	require.Equal(t, "https://app.example/hook", subs[0].NotifyURL)
	require.Equal(t, "start,completed", subs[0].Metadata[faceshape.MetaReplicateWebhookEvent], "in Replicate's order")
	require.Equal(t, srv.URL+"/replicate/"+route, subs[0].Metadata[faceshape.MetaReplicateBase])
	require.Equal(t, "start,output,logs,completed", subs[1].Metadata[faceshape.MetaReplicateWebhookEvent], "no filter: every event")
}

// A webhook that is not https beyond loopback, points at a private
// address (unless allowed), or a filter naming another event is refused,
// naming the field; nothing is submitted.
func TestBadWebhooks(t *testing.T) {
	t.Parallel()
	p, srv := setup(t)
	p.SetWebhooks(&face.Webhooks{Secret: hookSecret})
	for _, tc := range []struct{ body, field string }{
		{`{"input":{},"webhook":"http://app.example/hook"}`, "webhook"},
		{`{"input":{},"webhook":"https://10.1.2.3/hook"}`, "webhook"},
		{`{"input":{},"webhook":"http://127.0.0.1:9/hook"}`, "webhook"},
		{`{"input":{},"webhook":"https://169.254.169.254/"}`, "webhook"},
		{`{"input":{},"webhook":"javascript:alert(1)"}`, "webhook"},
		{`{"input":{},"webhook":"https://app.example/hook","webhook_events_filter":["done"]}`, "webhook_events_filter"},
		{`{"input":{},"webhook":"https://app.example/hook","webhook_events_filter":["start","start","logs","output","completed"]}`, "webhook_events_filter"},
		{`{"input":{},"webhook_events_filter":["completed"]}`, "webhook_events_filter"},
		{`{"input":{},"webhook":5}`, "webhook"},
	} {
		resp, body := do(t, srv, http.MethodPost, "/v1/models/acme/video/predictions", tc.body, nil)
		requireProblem(t, resp, body, http.StatusUnprocessableEntity, tc.field)
	}
	require.Empty(t, p.Submissions())

	p.SetWebhooks(&face.Webhooks{Secret: hookSecret, AllowPrivate: true})
	resp, body := do(t, srv, http.MethodPost, "/v1/models/acme/video/predictions", `{"input":{},"webhook":"http://127.0.0.1:9/hook"}`, nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode, body, "loopback over http where private addresses are allowed")
}

// GET /v1/webhooks/default/secret answers the caller's secret as
// Replicate does; a Pollux that calls no webhooks answers 404.
func TestWebhookSecret(t *testing.T) {
	t.Parallel()
	p, srv := setup(t)
	resp, body := do(t, srv, http.MethodGet, "/v1/webhooks/default/secret", "", nil)
	requireProblem(t, resp, body, http.StatusNotFound, "")
	p.SetWebhooks(&face.Webhooks{Secret: hookSecret})
	resp, body = do(t, srv, http.MethodGet, "/v1/webhooks/default/secret", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var got map[string]string
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.Equal(t, map[string]string{"key": hookSecret}, got)
}
