package fal

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/faceshape"
	"github.com/pollux-dev/pollux/internal/edge/face"
)

// hooked is a submit's target with fal_webhook u, as the fal client sends
// a webhookUrl.
func hooked(u string) string { return queue + "acme/video?fal_webhook=" + url.QueryEscape(u) }

// A submit's fal_webhook is checked, then recorded on the job: the URL as
// its notify_url, the face's URL in its metadata (which marks the fal
// webhook); the answer carries gateway_request_id, as fal's does.
func TestSubmitWithWebhook(t *testing.T) {
	t.Parallel()
	f, p := setup(t)
	p.SetWebhooks(&face.Webhooks{})
	r := call(t, f, http.MethodPost, hooked("https://app.example/hook?n=1"), `{"prompt":"a fox"}`)
	require.Equal(t, http.StatusOK, r.status, r.raw)
	require.Equal(t, r.body["request_id"], r.body["gateway_request_id"])
	subs := p.Submissions()
	require.Len(t, subs, 1)
	require.Equal(t, "https://app.example/hook?n=1", subs[0].NotifyURL)
	require.Equal(t, "http://example.com/fal/"+route, subs[0].Metadata[faceshape.MetaFalBase])
	require.Equal(t, "acme/video", subs[0].Metadata[MetaApp])

	submit(t, f, "acme/video", `{}`)
	subs = p.Submissions()
	require.Empty(t, subs[1].NotifyURL)
	require.NotContains(t, subs[1].Metadata, faceshape.MetaFalBase, "no webhook, no mark")
}

// A fal_webhook that is not https beyond loopback, points at a private
// address (unless allowed), is garbage, given twice, or sent to a Pollux
// that calls no webhooks is refused with fal's 422 naming
// ["query","fal_webhook"] before the input is read (or any file it
// carries stored); nothing is submitted.
func TestBadWebhooks(t *testing.T) {
	t.Parallel()
	f, p := setup(t)
	for _, target := range []string{hooked("https://app.example/hook")} {
		r := call(t, f, http.MethodPost, target, `{}`)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, r.raw)
		require.Contains(t, r.raw, "notify.submissions")
	}
	p.SetWebhooks(&face.Webhooks{})
	for _, target := range []string{
		hooked("http://app.example/hook"),
		hooked("https://10.1.2.3/hook"),
		hooked("http://127.0.0.1:9/hook"),
		hooked("https://169.254.169.254/latest"),
		hooked("https://[::1]/hook"),
		hooked("javascript:alert(1)"),
		hooked("https://user:pw@app.example/hook"),
		hooked(""),
		hooked("https://app.example/a") + "&fal_webhook=" + url.QueryEscape("https://app.example/b"),
	} {
		// A body that would be refused itself: the webhook is checked first.
		r := call(t, f, http.MethodPost, target, `{"image_url":"data:image/png;base64,iVBORw0KGgo=`)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s: %s", target, r.raw)
		require.Equal(t, []any{"query", "fal_webhook"}, r.body["detail"].([]any)[0].(map[string]any)["loc"], target)
	}
	require.Empty(t, p.Submissions())

	p.SetWebhooks(&face.Webhooks{AllowPrivate: true})
	r := call(t, f, http.MethodPost, hooked("http://127.0.0.1:9/hook"), `{}`)
	require.Equal(t, http.StatusOK, r.status, "loopback over http where private addresses are allowed: %s", r.raw)
}
