package luma

import (
	"net/http"

	"github.com/pollux-dev/pollux/internal/core/faceshape"
	"github.com/pollux-dev/pollux/internal/platform/safehttp"
)

// callback checks a create's callback_url and records it in the job's
// metadata md (the face's absolute URL, which the callbacks' output URLs
// are made of: faceshape.LumaCallbackBody); it returns the URL to call,
// "" when the create names none. The callbacks are Pollux's outbound
// webhooks to submissions' own URLs (notify_url): retried, in order,
// kept through restarts, each a POST of the generation on a change of
// its state (faceshape.LumaWants), the ended one last. Luma signs its
// callbacks with nothing; Pollux's carry its Standard Webhooks headers
// (the token's secret, as the Replicate face's webhooks), which a Luma
// app ignores — docs/faces.md says what an app should do instead.
func (f *Face) callback(r *http.Request, url *string, md map[string]string) (string, error) {
	if url == nil {
		return "", nil
	}
	hooks := f.Webhooks(r)
	switch {
	case *url == "":
		return "", invalid("callback_url", "callback_url: a URL, or leave it out")
	case hooks == nil:
		return "", invalid("callback_url", "callback_url: this Pollux calls no URLs of apps' own (its configuration sets no notify.submissions); poll the generation")
	}
	if err := safehttp.CheckURL(*url, hooks.AllowPrivate); err != nil {
		return "", invalid("callback_url", "callback_url: "+err.Error())
	}
	md[faceshape.MetaLumaBase] = f.Base(r)
	return *url, nil
}
