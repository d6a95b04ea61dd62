package runway

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/httpapi"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Kind is the adapter kind in route configuration.
const Kind = "runway"

// Defaults.
const (
	// DefaultBaseURL is Runway's API.
	DefaultBaseURL = "https://api.dev.runwayml.com"
	// DefaultVersion is the X-Runway-Version the SDK sends.
	DefaultVersion = "2024-11-06"
	// DefaultEndpoint is the create endpoint of a model given without one.
	DefaultEndpoint = "image_to_video"
	// PollFloor is Runway's shortest useful interval between task reads.
	PollFloor = 5 * time.Second
	// OutputRetention is the least time Runway keeps output URLs working.
	OutputRetention = 24 * time.Hour
)

// Options are the runway kind's route options.
type Options struct {
	// Endpoint is the create endpoint (the path after /v1/) of a job whose
	// model names none (default "image_to_video").
	Endpoint string `json:"endpoint,omitempty"`
	// Version is the X-Runway-Version header (default "2024-11-06").
	Version string `json:"version,omitempty"`
}

// Adapter talks to one Runway account.
type Adapter struct {
	api  httpapi.Client
	opts Options
}

var (
	endpointRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}(/[a-z][a-z0-9_]{0,63})?$`)
	modelRe    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	versionRe  = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)
	idRe       = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)
)

// New builds an adapter from a route's configuration.
func New(cfg provider.Config) (provider.Adapter, error) {
	return NewAdapter(cfg)
}

// NewAdapter builds an adapter and returns its concrete type.
func NewAdapter(cfg provider.Config) (*Adapter, error) {
	var o Options
	if len(cfg.Options) > 0 {
		dec := json.NewDecoder(bytes.NewReader(cfg.Options))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return nil, fmt.Errorf("options: %w", err)
		}
	}
	o.Endpoint = cmp.Or(o.Endpoint, DefaultEndpoint)
	o.Version = cmp.Or(o.Version, DefaultVersion)
	if !endpointRe.MatchString(o.Endpoint) {
		return nil, fmt.Errorf("options.endpoint: %q is not an endpoint path such as image_to_video", o.Endpoint)
	}
	if !versionRe.MatchString(o.Version) {
		return nil, fmt.Errorf("options.version: %q is not a date such as %s", o.Version, DefaultVersion)
	}
	if cfg.Token == "" {
		return nil, errors.New("token: required (a Runway API key)")
	}
	if cfg.WebhookSecret != "" {
		return nil, errors.New("webhook secret: Runway sends no webhooks")
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = httpapi.NewHTTPClient()
	}
	token, version := cfg.Token, o.Version
	return &Adapter{opts: o, api: httpapi.Client{
		BaseURL: cmp.Or(cfg.BaseURL, DefaultBaseURL),
		HTTP:    hc,
		Authorize: func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer "+token)
			r.Header.Set("X-Runway-Version", version)
		},
	}}, nil
}

// Info describes Runway: cancel, no webhooks, no idempotency key, a 5 s
// poll floor.
func (a *Adapter) Info() provider.Info {
	return provider.Info{Kind: Kind, Cancel: true, PollFloor: PollFloor}
}

// Submit creates a task.
func (a *Adapter) Submit(ctx context.Context, req provider.SubmitRequest) (provider.Status, error) {
	endpoint, model, err := a.route(req.Model)
	if err != nil {
		return provider.Status{}, err
	}
	body, err := withModel(req.Input, model)
	if err != nil {
		return provider.Status{}, err
	}
	resp, err := a.api.Do(ctx, http.MethodPost, "/v1/"+endpoint, body, nil)
	if err != nil {
		return provider.Status{}, err
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(resp.Body, &created); err != nil || !idRe.MatchString(created.ID) {
		return provider.Status{}, &provider.Error{Class: provider.Transient, Message: "Runway create response without a valid task id", Err: err}
	}
	st := provider.Status{RemoteID: created.ID}
	st.State = state.Queued
	return st, nil
}

// route splits a job's model into the create endpoint and Runway's model.
func (a *Adapter) route(s string) (endpoint, model string, err error) {
	endpoint, model, ok := strings.Cut(s, ":")
	if !ok {
		endpoint, model = a.opts.Endpoint, s
	}
	if !endpointRe.MatchString(endpoint) || !modelRe.MatchString(model) {
		return "", "", &provider.Error{Class: provider.Invalid,
			Message: fmt.Sprintf("model %q is not \"<endpoint>:<model>\" or \"<model>\" (e.g. image_to_video:gen4_turbo)", clip(s, 200))}
	}
	return endpoint, model, nil
}

// withModel returns the input object with "model" set.
func withModel(input json.RawMessage, model string) ([]byte, error) {
	fields, err := provider.InputWithModel(input, "model", model)
	if err != nil {
		return nil, err
	}
	return json.Marshal(fields)
}

// Status reads a task.
func (a *Adapter) Status(ctx context.Context, ref provider.Ref) (provider.Status, error) {
	if err := checkID(ref.ID); err != nil {
		return provider.Status{}, err
	}
	resp, err := a.api.Do(ctx, http.MethodGet, "/v1/tasks/"+ref.ID, nil, nil)
	if err != nil {
		return provider.Status{}, err
	}
	st, err := parseTask(resp.Body)
	st.PollAfter = httpapi.PollAfter(resp.Header, time.Now())
	return st, err
}

// Cancel cancels an unfinished task. A finished one is left alone, as
// Runway's DELETE would delete it and its outputs.
func (a *Adapter) Cancel(ctx context.Context, ref provider.Ref) (provider.Status, error) {
	st, err := a.Status(ctx, ref)
	if err != nil {
		return provider.Status{}, err
	}
	if st.State.Terminal() {
		return st, nil
	}
	if _, err := a.api.Do(ctx, http.MethodDelete, "/v1/tasks/"+ref.ID, nil, nil); err != nil {
		return provider.Status{}, err
	}
	out := provider.Status{RemoteID: ref.ID}
	out.State, out.Raw, out.Reason = state.Canceled, "CANCELLED", "canceled at Runway"
	return out, nil
}

func checkID(id string) error {
	if !idRe.MatchString(id) {
		return &provider.Error{Class: provider.Invalid, Message: fmt.Sprintf("task id %q is not valid", clip(id, 200))}
	}
	return nil
}

// task is the part of Runway's task object Pollux reads.
type task struct {
	ID          string          `json:"id"`
	Status      string          `json:"status"`
	CreatedAt   string          `json:"createdAt"`
	Progress    *float64        `json:"progress"`
	Output      json.RawMessage `json:"output"`
	Failure     string          `json:"failure"`
	FailureCode string          `json:"failureCode"`
}

// parseTask decodes a task into a normalized status.
func parseTask(b []byte) (provider.Status, error) {
	var t task
	if err := json.Unmarshal(b, &t); err != nil {
		return provider.Status{}, &provider.Error{Class: provider.Transient, Message: "malformed Runway task", Err: err}
	}
	if !idRe.MatchString(t.ID) {
		return provider.Status{}, &provider.Error{Class: provider.Transient, Message: "Runway task without a valid id"}
	}
	st := provider.Status{RemoteID: t.ID}
	st.Raw = clip(t.Status, 64)
	st.State = mapStatus(t.Status)
	if at, err := time.Parse(time.RFC3339Nano, t.CreatedAt); err == nil {
		st.CreatedAt = at.UTC() // an unreadable time is left out, not fatal
	}
	switch st.State {
	case state.Running:
		if t.Progress != nil && !math.IsNaN(*t.Progress) {
			p := min(max(*t.Progress, 0), 1)
			st.Progress = &p
		}
	case state.Succeeded:
		st.Outputs = urls(t.Output)
		if len(st.Outputs) > 0 && !st.CreatedAt.IsZero() {
			st.OutputsExpireAt = st.CreatedAt.Add(OutputRetention)
		}
	case state.Failed:
		st.Reason = clip(t.Failure, 1024)
		if t.FailureCode != "" {
			st.Reason = strings.TrimSpace(st.Reason + " (" + clip(t.FailureCode, 128) + ")")
		}
		st.Reason = cmp.Or(st.Reason, "failed at Runway without a reason")
	case state.Canceled:
		st.Reason = "canceled at Runway"
	}
	return st, nil
}

func mapStatus(s string) state.State {
	switch s {
	case "PENDING", "THROTTLED":
		return state.Queued
	case "RUNNING":
		return state.Running
	case "SUCCEEDED":
		return state.Succeeded
	case "FAILED":
		return state.Failed
	case "CANCELLED":
		return state.Canceled
	}
	return state.Unknown
}

// urls returns the http(s) strings of an output list.
func urls(raw json.RawMessage) []string {
	var list []any
	if json.Unmarshal(raw, &list) != nil {
		return nil
	}
	var out []string
	for _, v := range list {
		s, ok := v.(string)
		if ok && provider.IsOutputURL(s) && len(out) < provider.MaxOutputs {
			out = append(out, s)
		}
	}
	return out
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
