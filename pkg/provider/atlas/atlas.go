package atlas

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
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
const Kind = "atlas"

// Defaults.
const (
	// DefaultBaseURL is Atlas Cloud's media generation API.
	DefaultBaseURL = "https://api.atlascloud.ai/api/v1"
	// DefaultRetention is how long Atlas Cloud keeps generated media when
	// the submit sets no X-AtlasCloud-Object-Expiration-Hours: 14 days,
	// which is also the most it allows.
	DefaultRetention = 14 * 24 * time.Hour
	// MaxRetentionHours bounds both retention headers.
	MaxRetentionHours = 336
	// DefaultModelsTTL is how long the published model list is trusted.
	DefaultModelsTTL = 10 * time.Minute
	// ModelsMinRefresh is the least time between two fetches of the model
	// list, failed ones and misses included.
	ModelsMinRefresh = time.Minute
)

// Options are the atlas kind's route options.
type Options struct {
	// Media is the endpoint a model without a media prefix is generated
	// on: "video" (POST /model/generateVideo, the default), "image"
	// (generateImage) or "audio" (generateAudio). A job's model may name
	// it: "image:black-forest-labs/flux-dev".
	Media string `json:"media,omitempty"`
	// ObjectExpirationHours, 1 to 336, is sent as
	// X-AtlasCloud-Object-Expiration-Hours: how long Atlas Cloud keeps the
	// generated media; their URLs answer 404 afterwards (default 0: not
	// sent, and Atlas Cloud keeps them 14 days).
	ObjectExpirationHours int `json:"object_expiration_hours,omitempty"`
	// RequestRetentionHours, 1 to 336, is sent as
	// X-AtlasCloud-Request-Retention-Hours: how long Atlas Cloud keeps the
	// prediction record. A prediction unknown to Atlas Cloud after that
	// time is expired, not lost (default 0: not sent, Atlas Cloud's
	// standard policy; the header's own 0 is never sent, as what it means
	// is not documented).
	RequestRetentionHours int `json:"request_retention_hours,omitempty"`
	// ValidateModels checks a job's model against the published model
	// list (GET /models) before the billable submit, and refuses one not
	// in it (default false).
	ValidateModels bool `json:"validate_models,omitempty"`
	// ModelsTTL is how long a fetched model list is trusted, as a Go
	// duration (default "10m"); a model missing from it refreshes it at
	// most once a minute.
	ModelsTTL string `json:"models_ttl,omitempty"`
	// JWKSURL is where Atlas Cloud publishes its webhook signing keys
	// (default signature.AtlasVerifier's,
	// https://api.atlascloud.ai/api/v1/webhooks/jwks.json).
	JWKSURL string `json:"jwks_url,omitempty"`
}

// Adapter talks to one Atlas Cloud account.
type Adapter struct {
	api      httpapi.Client
	opts     Options
	verifier *signature.AtlasVerifier
	models   *modelList // nil unless Options.ValidateModels
	log      zerolog.Logger
	now      func() time.Time
}

var (
	// modelRe is an Atlas Cloud model id: "kwaivgi/kling-v3.0-std/text-to-video",
	// or an older short one such as "kling-v2.0".
	modelRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,255}$`)
	// idRe is a prediction id, a path segment.
	idRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// media maps a media kind to its submit path.
var media = map[string]string{
	"video": "/model/generateVideo",
	"image": "/model/generateImage",
	"audio": "/model/generateAudio",
}

// New builds an adapter from a route's configuration.
func New(cfg provider.Config) (provider.Adapter, error) {
	return NewAdapter(cfg)
}

// NewAdapter builds an adapter and returns its concrete type.
func NewAdapter(cfg provider.Config) (*Adapter, error) {
	var o Options
	if len(bytes.TrimSpace(cfg.Options)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(cfg.Options))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return nil, fmt.Errorf("options: %w", err)
		}
	}
	o.Media = cmp.Or(o.Media, "video")
	if _, ok := media[o.Media]; !ok {
		return nil, fmt.Errorf("options.media: %q is not video, image or audio", o.Media)
	}
	for name, h := range map[string]int{"object_expiration_hours": o.ObjectExpirationHours, "request_retention_hours": o.RequestRetentionHours} {
		if h < 0 || h > MaxRetentionHours {
			return nil, fmt.Errorf("options.%s: %d is not within 1 to %d (0: not sent)", name, h, MaxRetentionHours)
		}
	}
	ttl := DefaultModelsTTL
	if o.ModelsTTL != "" {
		d, err := time.ParseDuration(o.ModelsTTL)
		if err != nil || d < ModelsMinRefresh {
			return nil, fmt.Errorf("options.models_ttl: %q is not a duration of at least %s", o.ModelsTTL, ModelsMinRefresh)
		}
		ttl = d
	}
	if cfg.Token == "" {
		return nil, errors.New("token: required (an Atlas Cloud API key, sent as \"Authorization: Bearer <token>\")")
	}
	if cfg.WebhookSecret != "" {
		return nil, errors.New("webhook secret: Atlas Cloud signs webhooks with Ed25519 keys from its JWKS; set options.jwks_url if the default is wrong")
	}
	base, err := url.Parse(cmp.Or(cfg.BaseURL, DefaultBaseURL))
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" || base.User != nil || base.RawQuery != "" || base.Fragment != "" {
		return nil, fmt.Errorf("base_url: %q is not an http(s) URL without credentials, query or fragment", cfg.BaseURL)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = httpapi.NewHTTPClient()
	}
	token := cfg.Token
	a := &Adapter{opts: o, log: cfg.Logger, now: time.Now, api: httpapi.Client{
		BaseURL: strings.TrimRight(base.String(), "/"), HTTP: hc,
		Authorize: func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) },
	}}
	v, err := signature.NewAtlasVerifier(signature.AtlasVerifier{JWKSURL: o.JWKSURL, HTTPClient: hc,
		Now: func() time.Time { return a.now() }})
	if err != nil {
		return nil, fmt.Errorf("options.jwks_url: %w", err)
	}
	a.verifier = v
	if o.ValidateModels {
		a.models = &modelList{ttl: ttl}
	}
	return a, nil
}

// Info describes Atlas Cloud: signed webhooks, no cancel, no idempotency
// key, no poll floor.
func (a *Adapter) Info() provider.Info {
	return provider.Info{Kind: Kind, Webhooks: true}
}

// ref is what Submit keeps with a job: the retention it asked for and
// when, so expiry is computed from what the job was submitted with, not
// from the route's options of the day.
type ref struct {
	// At is the submit time, Unix seconds.
	At int64 `json:"at"`
	// ObjectHours and RecordHours are the retention headers sent; 0 for
	// none.
	ObjectHours int `json:"oh,omitempty"`
	RecordHours int `json:"rh,omitempty"`
}

// splitModel reads a job's model: an optional "video:", "image:" or
// "audio:" prefix, then the Atlas Cloud model id.
func (a *Adapter) splitModel(model string) (path, id string, err error) {
	kind, id := a.opts.Media, model
	if k, rest, ok := strings.Cut(model, ":"); ok {
		kind, id = k, rest
	}
	path, ok := media[kind]
	if !ok || !modelRe.MatchString(id) {
		return "", "", &provider.Error{Class: provider.Invalid,
			Message: fmt.Sprintf("model %q is not [video:|image:|audio:]<Atlas Cloud model id>", clip(model, 200))}
	}
	return path, id, nil
}

// Submit creates a prediction.
func (a *Adapter) Submit(ctx context.Context, req provider.SubmitRequest) (provider.Status, error) {
	path, model, err := a.splitModel(req.Model)
	if err != nil {
		return provider.Status{}, err
	}
	body, err := submitBody(req.Input, model, req.WebhookURL)
	if err != nil {
		return provider.Status{}, err
	}
	if a.models != nil {
		if err := a.models.check(ctx, a, model); err != nil {
			return provider.Status{}, err
		}
	}
	h := http.Header{}
	r := ref{At: a.now().Unix(), ObjectHours: a.opts.ObjectExpirationHours, RecordHours: a.opts.RequestRetentionHours}
	if r.ObjectHours > 0 {
		h.Set("X-AtlasCloud-Object-Expiration-Hours", strconv.Itoa(r.ObjectHours))
	}
	if r.RecordHours > 0 {
		h.Set("X-AtlasCloud-Request-Retention-Hours", strconv.Itoa(r.RecordHours))
	}
	x, err := a.api.Exchange(ctx, http.MethodPost, path, body, h)
	if err != nil {
		return provider.Status{}, err
	}
	if !x.OK() {
		e := failure(x, a.now())
		if x.Status == http.StatusNotFound {
			// A 404 at submit is an unknown model, or one the account may
			// not use: the input's fault, not a lost job.
			e.Class = provider.Invalid
		}
		return provider.Status{}, e
	}
	st, err := parseSubmit(x.Body, a.now())
	if err != nil {
		return provider.Status{}, err
	}
	st.RefData, _ = json.Marshal(r) // numbers only: cannot fail
	return st, nil
}

// submitBody is the job's input object with the model, and the webhook
// URL when Pollux asks for webhooks. An input naming another model is
// refused.
func submitBody(input json.RawMessage, model, webhookURL string) ([]byte, error) {
	fields, err := provider.InputWithModel(input, "model", model)
	if err != nil {
		return nil, err
	}
	if webhookURL != "" {
		fields["webhook_url"], _ = json.Marshal(webhookURL) // a string: cannot fail
	}
	return json.Marshal(fields)
}

// Status reads a prediction.
func (a *Adapter) Status(ctx context.Context, r provider.Ref) (provider.Status, error) {
	if !idRe.MatchString(r.ID) {
		return provider.Status{}, &provider.Error{Class: provider.Invalid, Message: fmt.Sprintf("prediction id %q is not one Atlas Cloud gives", clip(r.ID, 200))}
	}
	kept := a.kept(r.Data)
	x, err := a.api.Exchange(ctx, http.MethodGet, "/model/prediction/"+url.PathEscape(r.ID), nil, nil)
	if err != nil {
		return provider.Status{}, err
	}
	now := a.now()
	if !x.OK() {
		if x.Status == http.StatusNotFound && kept.RecordHours > 0 &&
			now.After(time.Unix(kept.At, 0).Add(time.Duration(kept.RecordHours)*time.Hour)) {
			st := provider.Status{RemoteID: r.ID}
			st.State = state.Expired
			st.Reason = fmt.Sprintf("Atlas Cloud no longer keeps the prediction: its record retention (%d h) has passed", kept.RecordHours)
			return st, nil
		}
		return provider.Status{}, failure(x, now)
	}
	st, err := parsePrediction(r.ID, x.Body, a.retention(kept), now)
	if err != nil {
		return provider.Status{}, err
	}
	st.PollAfter = httpapi.PollAfter(x.Header, now)
	a.warnUnknown(st)
	return st, nil
}

// kept decodes a job's RefData; the zero ref for a tracked job.
func (a *Adapter) kept(data json.RawMessage) ref {
	var r ref
	if len(data) > 0 && json.Unmarshal(data, &r) != nil {
		r = ref{}
	}
	return r
}

// retention is how long a job's outputs are kept: what its submit asked
// for, else (a tracked job) what the route asks for, else the default.
func (a *Adapter) retention(r ref) time.Duration {
	h := r.ObjectHours
	if r.At == 0 {
		h = a.opts.ObjectExpirationHours
	}
	if h <= 0 || h > MaxRetentionHours {
		return DefaultRetention
	}
	return time.Duration(h) * time.Hour
}

// warnUnknown logs a status value the adapter does not know: the job is
// left as it was and polled on, and the log says which value to map.
func (a *Adapter) warnUnknown(st provider.Status) {
	if st.State == state.Unknown {
		a.log.Warn().Str(logkey.RemoteID, st.RemoteID).Str(logkey.ProviderStatus, st.Raw).
			Msg("Atlas Cloud reported a status this adapter does not know; the job keeps being polled")
	}
}

// Cancel is not offered: Atlas Cloud documents no cancel endpoint.
func (a *Adapter) Cancel(context.Context, provider.Ref) (provider.Status, error) {
	return provider.Status{}, provider.ErrUnsupported
}

// failure classifies a non-2xx answer, with Atlas Cloud's msg as the
// message. 402 (insufficient balance) pauses the route like a refused key:
// no job can run until someone pays.
func failure(x *httpapi.Response, now time.Time) *provider.Error {
	e := httpapi.Classify(x.Status, x.Header, x.Body, now)
	if m := envelopeMessage(x.Body); m != "" {
		e.Message = m
	}
	if x.Status == http.StatusPaymentRequired {
		e.Class = provider.Auth
	}
	return e
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
