package replicate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/pollux-dev/pollux/pkg/provider"
)

// The bounds of a lookup: the window searched reaches FindSkew beyond the
// attempt on each side (the two clocks may disagree), and at most
// FindMaxPages pages of the list (Replicate's pages hold 100) are read. A
// window holding more predictions than that cannot be searched: the
// lookup cannot tell, rather than page an account's history.
const (
	FindSkew     = 2 * time.Minute
	FindMaxPages = 10
)

// Finding is the adapter of an account whose prediction list shows each
// prediction's webhook URL (Options.FindByWebhook): it is a
// provider.Finder, looking a prediction up by the per-job webhook URL
// Pollux sent.
type Finding struct {
	*Adapter
}

var _ provider.Finder = Finding{}

// listItem is the part of a listed prediction the lookup reads; the item
// itself is parsed as any prediction.
type listItem struct {
	Webhook   *string   `json:"webhook"`
	CreatedAt time.Time `json:"created_at"`
}

type listPage struct {
	Next    *string           `json:"next"`
	Results []json.RawMessage `json:"results"`
}

// Find lists the predictions created in req's attempt window (GET
// /v1/predictions with created_after and created_before, newest first,
// following "next" for at most FindMaxPages pages) and returns the one
// whose webhook URL is req.WebhookURL. Two of them, a window longer than
// the pages read, or a job sent without a webhook URL: ErrCannotTell.
func (f Finding) Find(ctx context.Context, req provider.SubmitRequest) (provider.Status, bool, error) {
	if req.WebhookURL == "" {
		return provider.Status{}, false, fmt.Errorf("%w: the job was sent without a webhook URL, the one thing the prediction list shows that names it", provider.ErrCannotTell)
	}
	if req.AttemptedAt.IsZero() || req.AttemptEnded.Before(req.AttemptedAt) {
		return provider.Status{}, false, fmt.Errorf("%w: no attempt window to search", provider.ErrCannotTell)
	}
	from, to := req.AttemptedAt.Add(-FindSkew).UTC(), req.AttemptEnded.Add(FindSkew).UTC()
	q := url.Values{}
	q.Set("created_after", from.Format(time.RFC3339Nano))
	q.Set("created_before", to.Format(time.RFC3339Nano))
	next := "/v1/predictions?" + q.Encode()
	var match json.RawMessage
	for range FindMaxPages {
		resp, err := f.api.Do(ctx, http.MethodGet, next, nil, nil)
		if err != nil {
			return provider.Status{}, false, f.throttled(throttle(err))
		}
		var page listPage
		if err := json.Unmarshal(resp.Body, &page); err != nil {
			return provider.Status{}, false, &provider.Error{Class: provider.Transient, Message: "malformed prediction list", Err: err}
		}
		older := false
		for _, raw := range page.Results {
			var it listItem
			if err := json.Unmarshal(raw, &it); err != nil {
				return provider.Status{}, false, &provider.Error{Class: provider.Transient, Message: "malformed prediction in the list", Err: err}
			}
			if it.CreatedAt.Before(from) {
				older = true // newest first: the window is behind us
				break
			}
			if it.CreatedAt.After(to) {
				continue
			}
			if it.Webhook == nil {
				// Not "no webhook": the list does not show them, and
				// would never show the job's.
				return provider.Status{}, false, fmt.Errorf("%w: the prediction list shows no webhook URLs (find_by_webhook needs an API whose list does)", provider.ErrCannotTell)
			}
			if *it.Webhook != req.WebhookURL {
				continue
			}
			if match != nil {
				return provider.Status{}, false, fmt.Errorf("%w: two predictions carry the job's webhook URL", provider.ErrCannotTell)
			}
			match = raw
		}
		if older || page.Next == nil || *page.Next == "" {
			return f.found(match)
		}
		if next, err = f.sameOrigin(*page.Next); err != nil {
			return provider.Status{}, false, err
		}
	}
	return provider.Status{}, false, fmt.Errorf("%w: more than %d pages of predictions were created around the attempt", provider.ErrCannotTell, FindMaxPages)
}

func (f Finding) found(raw json.RawMessage) (provider.Status, bool, error) {
	if raw == nil {
		return provider.Status{}, false, nil
	}
	st, err := parse(raw)
	if err != nil {
		return provider.Status{}, false, err
	}
	return st, true, nil
}

// sameOrigin checks that a page's "next" URL, which the answer gives, is
// on the API's own origin: the token goes with the request.
func (f Finding) sameOrigin(next string) (string, error) {
	u, err := url.Parse(next)
	base, berr := url.Parse(f.api.BaseURL)
	if err == nil && berr == nil {
		u = base.ResolveReference(u)
	}
	if err != nil || berr != nil || u.Scheme != base.Scheme || u.Host != base.Host {
		return "", &provider.Error{Class: provider.Transient, Message: fmt.Sprintf("the prediction list's next page %q is not on the API's origin", next)}
	}
	return u.String(), nil
}
