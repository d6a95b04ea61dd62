package veo

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/httpapi"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Kind is the adapter kind in route configuration.
const Kind = "veo"

// Defaults.
const (
	// DefaultBaseURL is the Gemini API host.
	DefaultBaseURL = "https://generativelanguage.googleapis.com"
	// OutputRetention is how long Google keeps a generated video.
	OutputRetention = 48 * time.Hour
)

// apiVersion prefixes every path.
const apiVersion = "/v1beta"

// Adapter talks to one Gemini API key.
type Adapter struct {
	api httpapi.Client
	now func() time.Time
}

var (
	modelRe     = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{0,127}$`)
	operationRe = regexp.MustCompile(`^(models/[a-z0-9][a-z0-9.-]{0,127}/)?operations/[A-Za-z0-9_-]{1,128}$`)
)

// New builds an adapter from a route's configuration.
func New(cfg provider.Config) (provider.Adapter, error) {
	return NewAdapter(cfg)
}

// NewAdapter builds an adapter and returns its concrete type. The veo kind
// has no options.
func NewAdapter(cfg provider.Config) (*Adapter, error) {
	if len(cfg.Options) > 0 {
		dec := json.NewDecoder(bytes.NewReader(cfg.Options))
		dec.DisallowUnknownFields()
		var none struct{}
		if err := dec.Decode(&none); err != nil {
			return nil, fmt.Errorf("options: the veo kind has none: %w", err)
		}
	}
	if cfg.Token == "" {
		return nil, errors.New("token: required (a Gemini API key)")
	}
	if cfg.WebhookSecret != "" {
		return nil, errors.New("webhook secret: the veo adapter takes no webhooks")
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = httpapi.NewHTTPClient()
	}
	token := cfg.Token
	return &Adapter{
		api: httpapi.Client{
			BaseURL:   strings.TrimRight(cmp.Or(cfg.BaseURL, DefaultBaseURL), "/"),
			HTTP:      hc,
			Authorize: func(r *http.Request) { r.Header.Set("x-goog-api-key", token) },
		},
		now: time.Now,
	}, nil
}

// Info describes Veo on the Gemini API: no cancel, no webhooks, no
// idempotency key, no poll floor.
func (a *Adapter) Info() provider.Info {
	return provider.Info{Kind: Kind}
}

// Submit starts a predictLongRunning operation.
func (a *Adapter) Submit(ctx context.Context, req provider.SubmitRequest) (provider.Status, error) {
	model := strings.TrimPrefix(req.Model, "models/")
	if !modelRe.MatchString(model) {
		return provider.Status{}, &provider.Error{Class: provider.Invalid,
			Message: fmt.Sprintf("model %q is not a Gemini model id such as veo-3.1-generate-preview", clip(req.Model, 200))}
	}
	body, err := requestBody(req.Input)
	if err != nil {
		return provider.Status{}, err
	}
	x, err := a.call(ctx, http.MethodPost, apiVersion+"/models/"+model+":predictLongRunning", body)
	if err != nil {
		return provider.Status{}, err
	}
	st, err := parseOperation(x, a.now())
	if err != nil {
		return provider.Status{}, err
	}
	if st.State == state.Running {
		st.State = state.Queued // accepted; nothing says it started
	}
	return st, nil
}

// requestBody maps a job's input to the PredictLongRunningRequest body.
func requestBody(input json.RawMessage) ([]byte, error) {
	fields := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(input)) > 0 {
		if err := json.Unmarshal(input, &fields); err != nil || fields == nil {
			return nil, &provider.Error{Class: provider.Invalid, Message: "input must be a JSON object"}
		}
	}
	if _, ok := fields["instances"]; ok {
		return inlineImages(input)
	}
	body := map[string]any{}
	if p, ok := fields["parameters"]; ok {
		body["parameters"] = p
		delete(fields, "parameters")
	}
	body["instances"] = []any{fields}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return inlineImages(b)
}

// Status reads the operation.
func (a *Adapter) Status(ctx context.Context, ref provider.Ref) (provider.Status, error) {
	if !operationRe.MatchString(ref.ID) {
		return provider.Status{}, &provider.Error{Class: provider.Invalid,
			Message: fmt.Sprintf("operation name %q is not models/{model}/operations/{id}", clip(ref.ID, 200))}
	}
	x, err := a.call(ctx, http.MethodGet, apiVersion+"/"+ref.ID, nil)
	if err != nil {
		return provider.Status{}, err
	}
	return parseOperation(x, a.now())
}

// Cancel is not supported: cancelling a Veo operation is not confirmed.
func (a *Adapter) Cancel(context.Context, provider.Ref) (provider.Status, error) {
	return provider.Status{}, provider.ErrUnsupported
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
