package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/httpapi"
	"github.com/pollux-dev/pollux/pkg/signature"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Kind is the adapter kind in route configuration.
const Kind = "replicate"

// DefaultBaseURL is Replicate's API.
const DefaultBaseURL = "https://api.replicate.com"

// OutputRetention is how long Replicate keeps an API prediction's outputs.
const OutputRetention = time.Hour

// Options are the replicate kind's route options.
type Options struct {
	// WebhookEvents is the webhook_events_filter sent with each prediction
	// (default ["completed"]: one delivery per prediction).
	WebhookEvents []string `json:"webhook_events,omitempty"`
	// Idempotent declares that the account honours the Idempotency-Key
	// header (Pollux's simulated provider does; Replicate documents no such
	// header), so a submission whose outcome is in doubt may be retried.
	Idempotent bool `json:"idempotent,omitempty"`
	// FindByWebhook declares that the account's prediction list (GET
	// /v1/predictions) shows each prediction's webhook URL (Pollux's
	// simulated provider does; Replicate's documented list does not), so a
	// submission whose outcome is in doubt is looked up by the per-job
	// webhook URL Pollux sent (Finding). Default false.
	FindByWebhook bool `json:"find_by_webhook,omitempty"`
}

// Adapter talks to one Replicate account.
type Adapter struct {
	api  httpapi.Client
	opts Options

	mu       sync.Mutex
	verifier *signature.Verifier
	retryAt  time.Time // no secret fetch before this: after a failed one, or a rate limit
	failures int       // failed secret fetches in a row
}

// New builds an adapter from a route's configuration: a Finding when its
// options say the account's prediction list can find a job.
func New(cfg provider.Config) (provider.Adapter, error) {
	a, err := NewAdapter(cfg)
	if err != nil {
		return nil, err
	}
	if a.opts.FindByWebhook {
		return Finding{a}, nil
	}
	return a, nil
}

// NewAdapter builds an adapter and returns its concrete type.
func NewAdapter(cfg provider.Config) (*Adapter, error) {
	var o Options
	if len(cfg.Options) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(cfg.Options)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return nil, fmt.Errorf("options: %w", err)
		}
	}
	if len(o.WebhookEvents) == 0 {
		o.WebhookEvents = []string{"completed"}
	}
	for _, e := range o.WebhookEvents {
		switch e {
		case "start", "output", "logs", "completed":
		default:
			return nil, fmt.Errorf("options.webhook_events: %q is not one of start, output, logs, completed", e)
		}
	}
	if cfg.Token == "" {
		return nil, errors.New("token: required (an API token from replicate.com/account/api-tokens)")
	}
	a := &Adapter{opts: o}
	if cfg.WebhookSecret != "" {
		v, err := signature.NewVerifier(cfg.WebhookSecret)
		if err != nil {
			return nil, fmt.Errorf("webhook secret: %w", err)
		}
		a.verifier = v
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	token := cfg.Token
	hc := cfg.HTTPClient
	if hc == nil {
		hc = httpapi.NewHTTPClient()
	}
	a.api = httpapi.Client{
		BaseURL:   base,
		HTTP:      hc,
		Authorize: func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) },
	}
	return a, nil
}

// Info describes Replicate.
func (a *Adapter) Info() provider.Info {
	return provider.Info{Kind: Kind, Cancel: true, Webhooks: true, Idempotent: a.opts.Idempotent}
}

// prediction is the part of Replicate's prediction object Pollux reads.
type prediction struct {
	ID          string          `json:"id"`
	Status      string          `json:"status"`
	Logs        string          `json:"logs"`
	Output      json.RawMessage `json:"output"`
	Error       json.RawMessage `json:"error"`
	CreatedAt   *time.Time      `json:"created_at"`
	StartedAt   *time.Time      `json:"started_at"`
	CompletedAt *time.Time      `json:"completed_at"`
	DataRemoved bool            `json:"data_removed"`
}

type createBody struct {
	Version             string          `json:"version,omitempty"`
	Input               json.RawMessage `json:"input"`
	Webhook             string          `json:"webhook,omitempty"`
	WebhookEventsFilter []string        `json:"webhook_events_filter,omitempty"`
}

var (
	modelRe   = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*/[a-z0-9][a-z0-9_.-]*$`)
	versionRe = regexp.MustCompile(`^[a-f0-9]{64}$`)
)

// Submit creates a prediction.
func (a *Adapter) Submit(ctx context.Context, req provider.SubmitRequest) (provider.Status, error) {
	body := createBody{Input: req.Input}
	path := ""
	model, version, hasVersion := strings.Cut(req.Model, ":")
	switch {
	case hasVersion && modelRe.MatchString(model) && versionRe.MatchString(version):
		path, body.Version = "/v1/predictions", version
	case versionRe.MatchString(req.Model):
		path, body.Version = "/v1/predictions", req.Model
	case modelRe.MatchString(req.Model):
		path = "/v1/models/" + req.Model + "/predictions"
	default:
		return provider.Status{}, &provider.Error{Class: provider.Invalid,
			Message: fmt.Sprintf("model %q is not owner/name, owner/name:version or a version id", req.Model)}
	}
	if req.WebhookURL != "" {
		body.Webhook, body.WebhookEventsFilter = req.WebhookURL, a.opts.WebhookEvents
	}
	h := http.Header{}
	if req.IdempotencyKey != "" {
		h.Set("Idempotency-Key", req.IdempotencyKey)
	}
	if !req.Deadline.IsZero() {
		// Whole seconds, rounded up: the provider never stops before
		// Pollux's own deadline.
		secs := max(int64(math.Ceil(time.Until(req.Deadline).Seconds())), 1)
		h.Set("Cancel-After", strconv.FormatInt(secs, 10)+"s")
	}
	return a.call(ctx, http.MethodPost, path, body, h)
}

// Status fetches a prediction.
func (a *Adapter) Status(ctx context.Context, ref provider.Ref) (provider.Status, error) {
	if err := checkID(ref.ID); err != nil {
		return provider.Status{}, err
	}
	return a.call(ctx, http.MethodGet, "/v1/predictions/"+ref.ID, nil, nil)
}

// Cancel cancels a prediction.
func (a *Adapter) Cancel(ctx context.Context, ref provider.Ref) (provider.Status, error) {
	if err := checkID(ref.ID); err != nil {
		return provider.Status{}, err
	}
	return a.call(ctx, http.MethodPost, "/v1/predictions/"+ref.ID+"/cancel", nil, nil)
}

func checkID(id string) error {
	if id == "" || len(id) > 128 || strings.ContainsAny(id, "/?#% ") {
		return &provider.Error{Class: provider.Invalid, Message: fmt.Sprintf("prediction id %q is not valid", id)}
	}
	return nil
}

func (a *Adapter) call(ctx context.Context, method, path string, body any, h http.Header) (provider.Status, error) {
	resp, err := a.api.Do(ctx, method, path, body, h)
	if err != nil {
		return provider.Status{}, a.throttled(throttle(err))
	}
	st, err := parse(resp.Body)
	st.PollAfter = httpapi.PollAfter(resp.Header, time.Now())
	return st, err
}

// throttled notes a rate limit the account met: no secret fetch is made
// until its Retry-After passes (the route's other calls wait for the
// route's pause; this one the adapter makes on its own).
func (a *Adapter) throttled(err error) error {
	if d := provider.RetryAfterOf(err); d > 0 && provider.ClassOf(err) == provider.RateLimited {
		a.mu.Lock()
		a.retryAt = later(a.retryAt, time.Now().Add(d))
		a.mu.Unlock()
	}
	return err
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

var resetsRe = regexp.MustCompile(`resets in ~?(\d+)\s*s`)

// throttle fills in the pause of a 429 from Replicate's documented body when
// there was no Retry-After header.
func throttle(err error) error {
	var pe *provider.Error
	if errors.As(err, &pe) && pe.Class == provider.RateLimited && pe.RetryAfter == 0 {
		if m := resetsRe.FindStringSubmatch(pe.Message); m != nil {
			if s, convErr := strconv.Atoi(m[1]); convErr == nil {
				pe.RetryAfter = min(time.Duration(s)*time.Second, httpapi.MaxRetryAfter)
			}
		}
	}
	return err
}

// parse decodes a prediction into a normalized status.
func parse(b []byte) (provider.Status, error) {
	var p prediction
	if err := json.Unmarshal(b, &p); err != nil {
		return provider.Status{}, &provider.Error{Class: provider.Transient, Message: "malformed prediction", Err: err}
	}
	if p.ID == "" {
		return provider.Status{}, &provider.Error{Class: provider.Transient, Message: "prediction without an id"}
	}
	st := provider.Status{RemoteID: p.ID}
	st.Raw = p.Status
	st.State = mapStatus(p.Status)
	if p.CreatedAt != nil {
		st.CreatedAt = p.CreatedAt.UTC()
	}
	if p.StartedAt != nil {
		st.StartedAt = p.StartedAt.UTC()
	}
	if p.CompletedAt != nil {
		st.CompletedAt = p.CompletedAt.UTC()
	}
	switch st.State {
	case state.Running:
		st.Progress = Progress(p.Logs)
	case state.Succeeded:
		st.Outputs = provider.AppendOutputURLs(nil, p.Output)
		if len(st.Outputs) > 0 && !st.CompletedAt.IsZero() && !p.DataRemoved {
			st.OutputsExpireAt = st.CompletedAt.Add(OutputRetention)
		}
	case state.Failed:
		st.Reason = errorText(p.Error)
		if st.Reason == "" {
			st.Reason = "failed without an error message"
		}
	case state.Canceled:
		st.Reason = "canceled at Replicate"
	case state.Expired:
		st.Reason = "aborted by Replicate: the deadline passed before the prediction started"
	}
	return st, nil
}

func mapStatus(s string) state.State {
	switch s {
	case "starting":
		return state.Queued
	case "processing":
		return state.Running
	case "succeeded":
		return state.Succeeded
	case "failed":
		return state.Failed
	case "canceled":
		return state.Canceled
	case "aborted":
		return state.Expired
	}
	return state.Unknown
}

var progressRe = regexp.MustCompile(`(\d{1,3})%\|`)

// Progress scrapes the last tqdm-style percentage from prediction logs.
func Progress(logs string) *float64 {
	if len(logs) > 64<<10 {
		logs = logs[len(logs)-64<<10:]
	}
	m := progressRe.FindAllStringSubmatch(logs, -1)
	if len(m) == 0 {
		return nil
	}
	pct, err := strconv.Atoi(m[len(m)-1][1])
	if err != nil || pct > 100 {
		return nil
	}
	p := float64(pct) / 100
	return &p
}

func errorText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return clip(s)
	}
	return clip(string(raw))
}

func clip(s string) string {
	if len(s) > 1024 {
		return s[:1024] + "…"
	}
	return s
}

// VerifyWebhook checks a delivery's Standard Webhooks signature and returns
// its webhook-id.
func (a *Adapter) VerifyWebhook(ctx context.Context, h http.Header, body []byte) (string, error) {
	v, err := a.signingVerifier(ctx)
	if err != nil {
		return "", err
	}
	id, err := v.Verify(h, body)
	if err != nil {
		return "", provider.VerifyError(err)
	}
	return id, nil
}

// ParseWebhook decodes a verified delivery (the prediction object).
func (a *Adapter) ParseWebhook(_ http.Header, body []byte) (provider.Status, error) {
	st, err := parse(body)
	if err != nil {
		return provider.Status{}, fmt.Errorf("%w: %w", provider.ErrMalformed, err)
	}
	return st, nil
}

// A failed fetch of the signing secret is retried after secretRetryBase,
// doubling with each failure in a row up to secretRetryMax: deliveries
// meanwhile are answered 503 and retried by Replicate, so one 5xx must not
// refuse them for long, and a lasting outage must not fetch per delivery.
const (
	secretRetryBase = time.Second
	secretRetryMax  = 30 * time.Second
)

// signingVerifier returns the verifier, fetching the account's signing
// secret from Replicate the first time when none is configured.
func (a *Adapter) signingVerifier(ctx context.Context) (*signature.Verifier, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.verifier != nil {
		return a.verifier, nil
	}
	if time.Now().Before(a.retryAt) {
		return nil, errors.New("webhook signing secret unavailable (fetch failed or rate limited recently)")
	}
	v, err := a.fetchSecret(ctx)
	if err != nil {
		a.failures++
		a.retryAt = time.Now().Add(min(secretRetryBase<<min(a.failures-1, 10), secretRetryMax))
		if d := provider.RetryAfterOf(err); d > 0 {
			a.retryAt = later(a.retryAt, time.Now().Add(d))
		}
		return nil, err
	}
	a.verifier, a.failures = v, 0
	return v, nil
}

// fetchSecret fetches the account's signing secret.
func (a *Adapter) fetchSecret(ctx context.Context) (*signature.Verifier, error) {
	resp, err := a.api.Do(ctx, http.MethodGet, "/v1/webhooks/default/secret", nil, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch webhook signing secret: %w", err)
	}
	var s struct {
		Key string `json:"key"`
	}
	if err := json.Unmarshal(resp.Body, &s); err != nil || s.Key == "" {
		return nil, errors.New("fetch webhook signing secret: no key in the response")
	}
	v, err := signature.NewVerifier(s.Key)
	if err != nil {
		return nil, fmt.Errorf("fetched webhook signing secret: %w", err)
	}
	return v, nil
}
