// Package httpapi is the client side every HTTP provider adapter shares:
// bounded response bodies, a timeout on every call, and the mapping of HTTP
// outcomes to provider error classes (including Retry-After).
package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pollux-dev/pollux/pkg/provider"
)

// Defaults.
const (
	// DefaultMaxBody caps a response body.
	DefaultMaxBody = 8 << 20
	// DefaultTimeout bounds a call when the client has no timeout.
	DefaultTimeout = 30 * time.Second
	// MaxRetryAfter caps a provider's requested pause.
	MaxRetryAfter = time.Hour
)

// NewHTTPClient returns an HTTP client for one provider account: a
// transport of its own that keeps enough idle connections for a poller's
// concurrency (Go's default keeps two per host, so concurrent calls would
// open and drop connections), DefaultTimeout on every call, and no
// redirects followed: where Pollux sends its credentials is Pollux's
// choice, not a response's.
func NewHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 128
	t.IdleConnTimeout = 90 * time.Second
	t.ResponseHeaderTimeout = DefaultTimeout
	return &http.Client{
		Transport:     t,
		Timeout:       DefaultTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

var defaultClient = sync.OnceValue(NewHTTPClient)

// Client calls one provider's JSON API.
type Client struct {
	// BaseURL is prefixed to relative paths.
	BaseURL string
	// HTTP makes the calls (default: one NewHTTPClient shared by every
	// Client without one).
	HTTP *http.Client
	// MaxBody caps response bodies (default DefaultMaxBody).
	MaxBody int64
	// Authorize adds credentials to each request.
	Authorize func(*http.Request)
	// Now is the clock used to read HTTP-date Retry-After values.
	Now func() time.Time
}

// Response is an answered call's status, headers and (bounded) body.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// OK reports a 2xx answer.
func (r *Response) OK() bool { return r.Status >= 200 && r.Status < 300 }

// Do sends a request (body is JSON-encoded unless nil or already []byte)
// and returns the 2xx response, or a *provider.Error classifying the failure.
func (c *Client) Do(ctx context.Context, method, path string, body any, header http.Header) (*Response, error) {
	r, err := c.Exchange(ctx, method, path, body, header)
	if err != nil {
		return nil, err
	}
	if r.OK() {
		return r, nil
	}
	return nil, Classify(r.Status, r.Header, r.Body, c.now())
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Exchange sends a request like Do and returns the answer whatever its
// HTTP status, for adapters that read providers' error answers themselves.
// Only failures to get an answer (transport errors, timeouts, a body over
// MaxBody) are errors, classified transient.
func (c *Client) Exchange(ctx context.Context, method, path string, body any, header http.Header) (*Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		if b != nil {
			rd = bytes.NewReader(b)
		}
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return nil, &provider.Error{Class: provider.Invalid, Message: "encode request", Err: err}
		}
		rd = bytes.NewReader(enc)
	}
	target := path
	if !strings.HasPrefix(path, "http://") && !strings.HasPrefix(path, "https://") {
		target = strings.TrimRight(c.BaseURL, "/") + path
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, &provider.Error{Class: provider.Invalid, Message: "build request", Err: err}
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	if c.Authorize != nil {
		c.Authorize(req)
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultClient()
	}
	if hc.Timeout == 0 {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
			defer cancel()
			req = req.WithContext(ctx)
		}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, &provider.Error{Class: provider.Transient, Message: method + " " + path, Err: scrub(err)}
	}
	defer func() { _ = resp.Body.Close() }()
	limit := cmp.Or(c.MaxBody, DefaultMaxBody)
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, &provider.Error{Class: provider.Transient, HTTPStatus: resp.StatusCode, Message: "read response", Err: scrub(err)}
	}
	if int64(len(data)) > limit {
		return nil, &provider.Error{Class: provider.Transient, HTTPStatus: resp.StatusCode,
			Message: fmt.Sprintf("response larger than %d bytes", limit)}
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// Classify maps a non-2xx response to a *provider.Error.
func Classify(status int, h http.Header, body []byte, now time.Time) *provider.Error {
	e := &provider.Error{HTTPStatus: status, Message: Detail(body), RetryAfter: RetryAfter(h, now)}
	switch {
	case status == http.StatusTooManyRequests:
		e.Class = provider.RateLimited
		e.Concurrency = speaksOfConcurrency(body)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Class = provider.Auth
	case status == http.StatusNotFound || status == http.StatusGone:
		e.Class = provider.NotFound
	case status == http.StatusRequestTimeout || status == http.StatusConflict || status == http.StatusTooEarly:
		e.Class = provider.Transient
	case status >= 400 && status < 500:
		e.Class = provider.Invalid
	default:
		e.Class = provider.Transient
	}
	if e.Class == provider.Transient && status == http.StatusServiceUnavailable && e.RetryAfter > 0 {
		e.Class = provider.RateLimited // 503 + Retry-After is an explicit request to back off
	}
	return e
}

// concurrencyWords are what a 429's body says when it refuses a job past a
// cap on jobs running at once rather than a call past a rate: "concurrency
// limit reached", "too many concurrent tasks", "N predictions running at
// once", "parallel task limit".
var concurrencyWords = []string{"concurren", "at once", "parallel", "simultaneous"}

// speaksOfConcurrency reports whether a refusal's body names a cap on jobs
// running at once.
func speaksOfConcurrency(body []byte) bool {
	b := strings.ToLower(string(body))
	return slices.ContainsFunc(concurrencyWords, func(w string) bool { return strings.Contains(b, w) })
}

// RetryAfter reads Retry-After (seconds or an HTTP date) or retry-after-ms,
// capped at MaxRetryAfter; 0 when absent or unreadable.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if ms := h.Get("Retry-After-Ms"); ms != "" {
		if v, err := strconv.ParseFloat(ms, 64); err == nil && v > 0 {
			return min(time.Duration(v*float64(time.Millisecond)), MaxRetryAfter)
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return min(time.Duration(secs*float64(time.Second)), MaxRetryAfter)
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return min(d, MaxRetryAfter)
		}
	}
	return 0
}

// PollAfter reads the hint a successful status answer may carry for the
// next poll: openai-poll-after-ms (the OpenAI-style video API), else
// Retry-After or retry-after-ms as RetryAfter reads them; 0 when absent or
// unreadable, at most MaxRetryAfter.
func PollAfter(h http.Header, now time.Time) time.Duration {
	if ms := strings.TrimSpace(h.Get("Openai-Poll-After-Ms")); ms != "" {
		if v, err := strconv.ParseFloat(ms, 64); err == nil && v > 0 {
			return min(time.Duration(v*float64(time.Millisecond)), MaxRetryAfter)
		}
	}
	return RetryAfter(h, now)
}

// Detail extracts a provider's error message from a JSON error body
// ("detail", "error", "message", "error.message", "title"), bounded in size;
// "" when there is none.
func Detail(body []byte) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	for _, k := range []string{"detail", "error", "message", "title"} {
		raw, ok := m[k]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil && s != "" {
			return clip(s)
		}
		var inner struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(raw, &inner) == nil && inner.Message != "" {
			return clip(inner.Message)
		}
	}
	return ""
}

func clip(s string) string {
	const n = 512
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// scrub drops the URL from transport errors: query strings may hold
// per-job tokens, and a log line needs only the failure.
func scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
