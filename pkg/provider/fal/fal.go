package fal

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/httpapi"
	"github.com/pollux-dev/pollux/pkg/signature"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Kind is the adapter kind in route configuration.
const Kind = "fal"

// DefaultBaseURL is fal's queue host.
const DefaultBaseURL = "https://queue.fal.run"

// Options are the fal kind's route options.
type Options struct {
	// UserID is the fal user id of the account. When set, webhooks are
	// asked for and verified, and deliveries for any other user id are
	// refused; when empty (the default) the route only polls.
	UserID string `json:"user_id,omitempty"`
	// JWKSURL is where fal publishes its webhook signing keys (default
	// signature.FalVerifier's, https://rest.fal.ai/.well-known/jwks.json).
	JWKSURL string `json:"jwks_url,omitempty"`
}

// Adapter talks to one fal account.
type Adapter struct {
	base     *url.URL // the queue host, without a trailing slash
	api      httpapi.Client
	verifier *signature.FalVerifier // nil without webhooks
	log      zerolog.Logger
	now      func() time.Time
}

// New builds an adapter from a route's configuration.
func New(cfg provider.Config) (provider.Adapter, error) {
	return NewAdapter(cfg)
}

// NewAdapter builds an adapter and returns its concrete type.
func NewAdapter(cfg provider.Config) (*Adapter, error) {
	var o Options
	if err := decodeOptions(cfg.Options, &o); err != nil {
		return nil, err
	}
	if cfg.Token == "" {
		return nil, errors.New("token: required (a fal API key, sent as \"Authorization: Key <token>\")")
	}
	if cfg.WebhookSecret != "" {
		return nil, errors.New("webhook secret: fal signs webhooks with ed25519 keys from its JWKS; set options.user_id instead")
	}
	base, err := url.Parse(cmp.Or(cfg.BaseURL, DefaultBaseURL))
	if err != nil || base.Scheme != "https" || base.Host == "" || base.User != nil || base.RawQuery != "" || base.Fragment != "" {
		return nil, fmt.Errorf("base_url: %q is not an https URL without credentials, query or fragment", cfg.BaseURL)
	}
	base.Path = strings.TrimRight(base.Path, "/")
	base.RawPath = ""

	hc := cfg.HTTPClient
	if hc == nil {
		hc = httpapi.NewHTTPClient()
	}
	// Never follow a redirect: where Pollux sends the key is Pollux's
	// choice, not the response's.
	noRedirect := *hc
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	token := cfg.Token
	a := &Adapter{base: base, log: cfg.Logger, now: time.Now, api: httpapi.Client{
		HTTP: &noRedirect, Authorize: func(r *http.Request) { r.Header.Set("Authorization", "Key "+token) },
	}}
	if o.UserID != "" {
		v, err := signature.NewFalVerifier(signature.FalVerifier{JWKSURL: o.JWKSURL, UserID: o.UserID, HTTPClient: hc})
		if err != nil {
			return nil, fmt.Errorf("options: %w", err)
		}
		a.verifier = v
	} else if o.JWKSURL != "" {
		return nil, errors.New("options.jwks_url: set only with options.user_id (webhooks)")
	}
	return a, nil
}

func decodeOptions(raw json.RawMessage, o *Options) error {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(o); err != nil {
		return fmt.Errorf("options: %w", err)
	}
	return nil
}

// Info describes fal: cancel, webhooks when a user id is configured, no
// idempotency key, no poll floor.
func (a *Adapter) Info() provider.Info {
	return provider.Info{Kind: Kind, Cancel: true, Webhooks: a.verifier != nil}
}

// minRequestTimeout is the smallest X-Fal-Request-Timeout sent: fal's JS
// client refuses values of 1 s or less.
const minRequestTimeout = 2

// Submit puts a request on the model's queue.
func (a *Adapter) Submit(ctx context.Context, req provider.SubmitRequest) (provider.Status, error) {
	if _, err := appOf(req.Model); err != nil {
		return provider.Status{}, err
	}
	body := []byte(req.Input)
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if !isObject(body) {
		return provider.Status{}, &provider.Error{Class: provider.Invalid, Message: "input must be a JSON object"}
	}
	target := a.base.String() + "/" + req.Model
	if req.WebhookURL != "" {
		target += "?fal_webhook=" + url.QueryEscape(req.WebhookURL)
	}
	h := http.Header{}
	if !req.Deadline.IsZero() {
		// Whole seconds, rounded up: fal never gives up before Pollux does.
		secs := int64(math.Ceil(req.Deadline.Sub(a.now()).Seconds()))
		h.Set("X-Fal-Request-Timeout", strconv.FormatInt(max(secs, minRequestTimeout), 10))
	}
	x, err := a.call(ctx, http.MethodPost, target, body, h)
	if err != nil {
		return provider.Status{}, err
	}
	if !x.OK() {
		return provider.Status{}, failure(x, a.now())
	}
	st, urls, err := parseSubmit(x.Body)
	if err != nil {
		return provider.Status{}, err
	}
	if a.onQueue(urls.StatusURL, st.RemoteID) && a.onQueue(urls.ResponseURL, st.RemoteID) && a.onQueue(urls.CancelURL, st.RemoteID) {
		st.RefData, _ = json.Marshal(urls) // plain strings: cannot fail
	} else {
		a.log.Warn().Str(logkey.RemoteID, st.RemoteID).
			Msg("fal returned queue URLs off the configured queue host; using the documented URL pattern")
	}
	return st, nil
}

// Status fetches a request's status and, once it completed without an
// error, its result.
func (a *Adapter) Status(ctx context.Context, ref provider.Ref) (provider.Status, error) {
	urls, err := a.urls(ref)
	if err != nil {
		return provider.Status{}, err
	}
	x, err := a.call(ctx, http.MethodGet, urls.StatusURL, nil, nil)
	if err != nil {
		return provider.Status{}, err
	}
	if !x.OK() {
		return provider.Status{}, failure(x, a.now())
	}
	st, next, err := parseStatus(ref.ID, x.Body)
	if err != nil {
		return provider.Status{}, err
	}
	st.PollAfter = httpapi.PollAfter(x.Header, a.now())
	switch next {
	case fetchResult:
		return a.result(ctx, st, urls.ResponseURL)
	case checkTimeout:
		return a.timedOut(ctx, st, urls.ResponseURL), nil
	}
	return st, nil
}

// result confirms a COMPLETED request from its result.
func (a *Adapter) result(ctx context.Context, st provider.Status, responseURL string) (provider.Status, error) {
	x, err := a.call(ctx, http.MethodGet, responseURL, nil, nil)
	if err != nil {
		return provider.Status{}, err
	}
	switch {
	case x.OK():
		st.State = state.Succeeded
		st.Outputs = provider.AppendOutputURLs(nil, x.Body)
		return st, nil
	case userTimeout(x):
		return expired(st), nil
	}
	e := failure(x, a.now())
	if e.Class != provider.Invalid {
		return provider.Status{}, e
	}
	// The request's own answer is an error: the model refused its input.
	st.State = state.Failed
	st.Reason = cmp.Or(e.Message, fmt.Sprintf("fal answered the result with HTTP %d", x.Status))
	return st, nil
}

// timedOut tells a request that timed out before starting, because of the
// deadline Pollux gave it (expired), from one that timed out otherwise (st,
// failed). When the result cannot be read, st stands.
func (a *Adapter) timedOut(ctx context.Context, st provider.Status, responseURL string) provider.Status {
	x, err := a.call(ctx, http.MethodGet, responseURL, nil, nil)
	if err == nil && userTimeout(x) {
		return expired(st)
	}
	return st
}

func expired(st provider.Status) provider.Status {
	st.State = state.Expired
	st.Reason = "fal: the request did not start before its X-Fal-Request-Timeout (the job's deadline)"
	st.Outputs = nil
	return st
}

// Cancel asks fal to cancel a request.
func (a *Adapter) Cancel(ctx context.Context, ref provider.Ref) (provider.Status, error) {
	urls, err := a.urls(ref)
	if err != nil {
		return provider.Status{}, err
	}
	x, err := a.call(ctx, http.MethodPut, urls.CancelURL, nil, nil)
	if err != nil {
		return provider.Status{}, err
	}
	answer := cancelAnswer(x.Body)
	switch answer {
	case "OK":
		return provider.Status{Observation: state.Observation{State: state.Canceled, Raw: answer,
			Reason: "canceled at fal before it started"}, RemoteID: ref.ID}, nil
	case "CANCELLATION_REQUESTED":
		// The running app was signalled and decides; polling tells.
		return provider.Status{Observation: state.Observation{State: state.Unknown, Raw: answer}, RemoteID: ref.ID}, nil
	case "ALREADY_COMPLETED":
		return a.Status(ctx, ref)
	case "NOT_FOUND":
		return provider.Status{}, &provider.Error{Class: provider.NotFound, HTTPStatus: x.Status, Message: "fal does not know the request"}
	}
	if !x.OK() {
		return provider.Status{}, failure(x, a.now())
	}
	return provider.Status{Observation: state.Observation{State: state.Unknown, Raw: answer}, RemoteID: ref.ID}, nil
}

func isObject(b []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}
