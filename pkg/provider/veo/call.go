package veo

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/httpapi"
)

// call makes one bounded call and returns a 2xx body, or the failure
// classified with Google's error details, which httpapi.Classify alone
// does not read.
func (a *Adapter) call(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	x, err := a.api.Exchange(ctx, method, path, body, nil)
	if err != nil {
		return nil, err
	}
	if x.OK() {
		return x.Body, nil
	}
	return nil, classify(x.Status, x.Header, x.Body, a.now())
}

// googleError is a Google API error body.
type googleError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []struct {
			Type       string `json:"@type"`
			Reason     string `json:"reason"`
			RetryDelay string `json:"retryDelay"`
		} `json:"details"`
	} `json:"error"`
}

// classify maps a non-2xx answer to an error class by its HTTP status, as
// httpapi does, then by Google's details: an API_KEY_INVALID reason is an
// auth failure although Google answers it with 400, and a RetryInfo delay
// is the pause of a rate limit that came without Retry-After.
func classify(status int, h http.Header, body []byte, now time.Time) *provider.Error {
	e := httpapi.Classify(status, h, body, now)
	var g googleError
	if json.Unmarshal(body, &g) != nil {
		return e
	}
	if g.Error.Status != "" && e.Message != "" {
		e.Message = g.Error.Status + ": " + e.Message
	}
	for _, d := range g.Error.Details {
		switch {
		case d.Reason == "API_KEY_INVALID":
			e.Class = provider.Auth
		case d.RetryDelay != "" && e.Class == provider.RateLimited && e.RetryAfter == 0:
			if dl, err := time.ParseDuration(d.RetryDelay); err == nil && dl > 0 {
				e.RetryAfter = min(dl, httpapi.MaxRetryAfter)
			}
		}
	}
	return e
}
