package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/pollux-dev/pollux/pkg/provider"
)

// maxRedirects bounds the redirects a download follows.
const maxRedirects = 5

// Download GETs one of a job's output URLs on the API's host (BaseURL's)
// with Authorize's credentials, for an adapter whose outputs need them
// (provider.OutputOpener); an output on another host is not its to open
// (provider.ErrUnsupported: the caller fetches it as any URL). A redirect
// is followed, the credentials dropped if it leaves the host (for the
// storage a download is often sent to). ctx bounds the whole download (the
// client's own timeout does not apply: a video may take longer). A 404 or
// 410 is a NotFound *provider.Error; other failures are classified as
// calls are.
func (c *Client) Download(ctx context.Context, raw string) (io.ReadCloser, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("output URL: not an http(s) URL")
	}
	api, err := url.Parse(c.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("base URL: %w", err)
	}
	if u.Host != api.Host {
		return nil, fmt.Errorf("output on %s, not the API's host: %w", u.Host, provider.ErrUnsupported)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, err
	}
	var secret []string // the headers the credentials are in
	if c.Authorize != nil {
		before := req.Header.Clone()
		c.Authorize(req)
		for k := range req.Header {
			if _, ok := before[k]; !ok {
				secret = append(secret, k)
			}
		}
	}
	resp, err := c.downloads(secret).Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may carry a token
		}
		return nil, &provider.Error{Class: provider.Transient, Err: err}
	}
	if resp.StatusCode/100 == 2 {
		return resp.Body, nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone {
		return nil, &provider.Error{Class: provider.NotFound, HTTPStatus: resp.StatusCode}
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	return nil, Classify(resp.StatusCode, resp.Header, body, now())
}

// downloads is the client of downloads: the calls' transport, redirects
// followed with the credentials' headers dropped on another host, and no
// timeout of its own.
func (c *Client) downloads(secret []string) *http.Client {
	hc := c.HTTP
	if hc == nil {
		hc = defaultClient()
	}
	return &http.Client{Transport: hc.Transport, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("more than %d redirects", maxRedirects)
		}
		if req.URL.Host != via[0].URL.Host {
			for _, k := range secret {
				req.Header.Del(k)
			}
		}
		return nil
	}}
}
