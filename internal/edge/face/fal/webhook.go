package fal

import (
	"net/http"

	"github.com/pollux-dev/pollux/internal/core/faceshape"
	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/platform/safehttp"
)

// webhook checks a submit's fal_webhook values (nil: none) and records
// the face's absolute URL in the job's metadata md, which marks the job's
// webhook and which package notify makes the delivery's output URLs of
// (faceshape.FalHook, FalWebhookBody); it returns the URL to deliver to,
// "" when the submit names none. The delivery is Pollux's outbound
// webhook to a submission's own URL (notify_url): retried, kept through
// restarts, sent once the request has ended, with fal's body and signed
// as fal signs, by a key whose JWKS the front door serves
// (GET /fal/.well-known/jwks.json). A refusal is fal's 422 naming
// ["query", "fal_webhook"].
func (f *Face) webhook(r *http.Request, values []string, md map[string]string) (string, error) {
	invalid := func(msg string) error {
		return &face.Error{Status: http.StatusUnprocessableEntity, Code: "invalid_parameter", Field: "fal_webhook", Message: "fal_webhook: " + msg}
	}
	switch {
	case values == nil:
		return "", nil
	case len(values) > 1:
		return "", invalid("given more than once")
	}
	hooks := f.Webhooks(r)
	if hooks == nil {
		return "", invalid("this Pollux calls no webhooks of apps' own (its configuration sets no notify.submissions); poll the status (fal.subscribe)")
	}
	if err := safehttp.CheckURL(values[0], hooks.AllowPrivate); err != nil {
		return "", invalid(err.Error())
	}
	md[faceshape.MetaFalBase] = f.Base(r)
	return values[0], nil
}
