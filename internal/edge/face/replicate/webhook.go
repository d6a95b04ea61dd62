package replicate

import (
	"net/http"

	"github.com/pollux-dev/pollux/internal/core/faceshape"
	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/platform/safehttp"
)

// hookTarget is how a create's webhook may be called: Pollux's webhooks
// (nil when it calls none) and the face's absolute URL, which the
// deliveries' prediction URLs are made of.
type hookTarget struct {
	*face.Webhooks
	base string
}

// webhook checks a create's webhook and webhook_events_filter and records
// them in the job's metadata md (the filter and the face's URL, which
// package notify renders the deliveries with: faceshape); it returns the
// URL to deliver to, "" when the create names none. The deliveries are
// Pollux's outbound webhooks to submissions' own URLs (notify_url):
// retried, in order, kept through restarts, and signed as Replicate signs
// with the caller's secret (webhookSecret).
func (h hookTarget) webhook(url string, filter []string, md map[string]string) (string, error) {
	if url == "" {
		if len(filter) > 0 {
			return "", invalid("webhook_events_filter", "webhook_events_filter: given without a webhook")
		}
		return "", nil
	}
	if h.Webhooks == nil {
		return "", invalid("webhook", "webhook: this Pollux calls no webhooks of apps' own (its configuration sets no notify.submissions); follow the prediction with get")
	}
	if err := safehttp.CheckURL(url, h.AllowPrivate); err != nil {
		return "", invalid("webhook", "webhook: "+err.Error())
	}
	events, err := faceshape.ReplicateFilter(filter)
	if err != nil {
		return "", invalid("webhook_events_filter", "webhook_events_filter: "+err.Error())
	}
	md[faceshape.MetaReplicateWebhookEvent], md[faceshape.MetaReplicateBase] = events, h.base
	return url, nil
}

// webhookSecret answers GET /v1/webhooks/default/secret: the calling
// token's signing secret ({"key": "whsec_…"}), which the SDK's
// validateWebhook() checks a delivery with.
func (f *Face) webhookSecret(w http.ResponseWriter, r *http.Request) error {
	hooks := f.Webhooks(r)
	if hooks == nil {
		return notFound("this Pollux calls no webhooks of apps' own (its configuration sets no notify.submissions), so it has no webhook secret")
	}
	return face.WriteJSON(w, http.StatusOK, map[string]string{"key": hooks.Secret})
}
