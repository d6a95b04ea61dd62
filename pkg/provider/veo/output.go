package veo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/httpapi"
)

var _ provider.OutputOpener = (*Adapter)(nil)

// maxRedirects bounds the redirects an output's download follows.
const maxRedirects = 5

// OpenOutput downloads a generated video: a Gemini Files API URI needs the
// API key, sent in the x-goog-api-key header to the API's host only (not
// to another host, nor on a redirect to one, such as the storage Google
// redirects a download to). ctx bounds the whole download. A 404 or 410
// is a NotFound *provider.Error: the video is gone.
func (a *Adapter) OpenOutput(ctx context.Context, raw string) (io.ReadCloser, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("output URL %q: not an http(s) URL", raw)
	}
	api, err := url.Parse(a.api.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("base URL: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, err
	}
	if u.Host == api.Host {
		a.api.Authorize(req)
	}
	resp, err := a.downloads().Do(req)
	if err != nil {
		return nil, &provider.Error{Class: provider.Transient, Err: errors.Unwrap(err)}
	}
	if resp.StatusCode/100 == 2 {
		return resp.Body, nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone {
		return nil, &provider.Error{Class: provider.NotFound, HTTPStatus: resp.StatusCode}
	}
	return nil, httpapi.Classify(resp.StatusCode, resp.Header, body, a.now())
}

// downloads is the client of downloads: the API client's transport,
// redirects followed (the key stays behind on another host), no timeout
// of its own (the caller's context bounds a download, which may be long).
func (a *Adapter) downloads() *http.Client {
	hc := a.api.HTTP
	if hc == nil {
		hc = httpapi.NewHTTPClient()
	}
	return &http.Client{Transport: hc.Transport, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("more than %d redirects", maxRedirects)
		}
		if req.URL.Host != via[0].URL.Host {
			req.Header.Del("x-goog-api-key")
		}
		return nil
	}}
}
