package fal

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/httpapi"
)

// fal's cancel answers and its timeout header come with non-2xx statuses,
// so fal reads every answer with httpapi's Exchange and classifies it here.

// userTimeout reports fal's answer to a request whose X-Fal-Request-Timeout
// passed before it started.
func userTimeout(x *httpapi.Response) bool {
	return x.Status == http.StatusGatewayTimeout && strings.EqualFold(x.Header.Get("X-Fal-Request-Timeout-Type"), "user")
}

// failure classifies a non-2xx answer, with fal's own detail as the message.
func failure(x *httpapi.Response, now time.Time) *provider.Error {
	e := httpapi.Classify(x.Status, x.Header, x.Body, now)
	if d := detail(x.Body); d != "" {
		e.Message = d
	}
	return e
}

// call makes one bounded call to fal and returns its answer, whatever its
// status.
func (a *Adapter) call(ctx context.Context, method, target string, body []byte, h http.Header) (*httpapi.Response, error) {
	return a.api.Exchange(ctx, method, target, body, h)
}
