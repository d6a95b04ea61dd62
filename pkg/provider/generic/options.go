package generic

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Options describe one provider's HTTP API to the generic adapter: the
// route's options of kind "generic", as YAML or JSON. See the examples
// directory for complete ones.
type Options struct {
	// BaseURL is prefixed to every path. Required, unless the route's own
	// base_url is set, which overrides it.
	BaseURL string `json:"base_url,omitempty"`
	// Auth says how the token is sent (default "Authorization: Bearer
	// <token>").
	Auth Auth `json:"auth,omitzero"`
	// Headers are sent with every call (default none).
	Headers map[string]string `json:"headers,omitempty"`
	// DefaultEndpoint is {endpoint} for a model given without one. A
	// job's model is "<endpoint>:<model>" or "<model>"; paths may use
	// {endpoint} and {model} (default none: a path with {endpoint} then
	// needs a model that names one).
	DefaultEndpoint string `json:"default_endpoint,omitempty"`
	// Submit creates a job. Required.
	Submit SubmitCall `json:"submit"`
	// Status reads a job. Required.
	Status StatusCall `json:"status"`
	// States maps the provider's raw status values to queued, running,
	// succeeded, failed, canceled, expired, unknown or not_found (the
	// provider does not know the job: Pollux reconciles). Values not in
	// the map are unknown, never terminal. Required.
	States map[string]string `json:"states"`
	// FollowUp, when set, is a second call made once a job succeeded, whose
	// answer holds the outputs (default none).
	FollowUp *FollowUpCall `json:"follow_up,omitempty"`
	// Cancel, when set, is the call that cancels a job (default none: the
	// provider cannot cancel).
	Cancel *CancelCall `json:"cancel,omitempty"`
	// Errors reads errors the provider reports inside 2xx answers (default
	// none: only HTTP statuses are errors).
	Errors *BodyErrors `json:"errors,omitempty"`
	// PollFloor is the shortest useful interval between status calls
	// (default 0, none).
	PollFloor Duration `json:"poll_floor,omitzero"`
	// OutputsTTL is how long outputs stay available after the job
	// completed (default 0, unknown: no expiry is recorded).
	OutputsTTL Duration `json:"outputs_ttl,omitzero"`
	// Callback, when set, takes the provider's notices that a job changed
	// (default none). Unsigned or signed, Pollux takes each as a hint and
	// confirms it with a status call; a signed one is verified first.
	Callback *CallbackCall `json:"callback,omitempty"`
	// HTTP404 is what a 404 from a status call means: "not_found" (the
	// default; Pollux reconciles) or "expired" (the provider drops finished
	// jobs, so a job it no longer knows is gone).
	HTTP404 string `json:"http_404_is,omitempty"`
}

// CallbackCall says how the provider is given a callback URL, how a
// callback names its job, and how it is signed.
type CallbackCall struct {
	// URLField is the submit body's field that gets the job's callback
	// URL (for example "callback_url"). Required for unsigned callbacks;
	// for signed ones, empty when the provider's endpoint is configured on
	// its side rather than per job (default none).
	URLField string `json:"url_field,omitempty"`
	// IDPath is the JSON path of the job's id in a callback body. Required.
	IDPath string `json:"id_path"`
	// Signature is how callbacks are signed: "" (unsigned, the default)
	// or "standard_webhooks" (Standard Webhooks v1: HMAC-SHA256 over
	// webhook-id.webhook-timestamp.body under the route's whsec_ webhook
	// secret, as OpenAI signs its video.completed and video.failed
	// events). A signed delivery that fails verification is refused; one
	// that passes is a hint, deduplicated on its webhook-id.
	Signature string `json:"signature,omitempty"`
}

// Auth is how the token is sent.
type Auth struct {
	// Header carries the credential (default "Authorization").
	Header string `json:"header,omitempty"`
	// Format is the header's value, with {token} where the token goes
	// (default "Bearer {token}"; "{token}" sends it bare).
	Format string `json:"format,omitempty"`
	// JWT, when set, makes {token} a fresh HS256 JWT per call, signed from
	// a token of the form "<access key>:<secret key>" (Kling's scheme).
	JWT *JWT `json:"jwt,omitempty"`
}

// JWT configures the HS256 tokens minted per call.
type JWT struct {
	// TTL is how long each token is valid (default 30m).
	TTL Duration `json:"ttl,omitzero"`
}

// SubmitCall is the call that creates a job.
type SubmitCall struct {
	// Method is the HTTP method (default POST).
	Method string `json:"method,omitempty"`
	// Path is the request path; it may use {model} and {endpoint}.
	// Required.
	Path string `json:"path"`
	// InputField, when set, puts the job's input under this field of the
	// body; otherwise the input object is the body (default).
	InputField string `json:"input_field,omitempty"`
	// ModelField, when set, is the top-level body field that gets the
	// model (default none). An input that sets it to another value is
	// refused.
	ModelField string `json:"model_field,omitempty"`
	// Headers are sent with the submit call only (default none).
	Headers map[string]string `json:"headers,omitempty"`
	// IDPath locates the job's id in the answer. Required.
	IDPath string `json:"id_path"`
}

// StatusCall is the call that reads a job.
type StatusCall struct {
	// Method is the HTTP method (default GET).
	Method string `json:"method,omitempty"`
	// Path is the request path; it may use {id}, {model} and {endpoint}.
	// Required.
	Path string `json:"path"`
	// StatePath locates the raw status value. Required.
	StatePath string `json:"state_path"`
	// ProgressPath locates a running job's progress (default none).
	ProgressPath string `json:"progress_path,omitempty"`
	// ProgressScale is what the progress value counts up to (default 1;
	// 100 for percentages).
	ProgressScale float64 `json:"progress_scale,omitempty"`
	// QueuePositionPath locates a queued job's place in the provider's
	// queue, 1 being next (default none).
	QueuePositionPath string `json:"queue_position_path,omitempty"`
	// ETAPath locates the provider's estimate of the seconds the job has
	// left (default none). A poll-after hint on the answer
	// (openai-poll-after-ms, Retry-After, retry-after-ms) is always read.
	ETAPath string `json:"eta_path,omitempty"`
	// ReasonPaths locate the explanation of a failed, canceled or expired
	// job; the values found are joined with ": " (default none).
	ReasonPaths []string `json:"reason_paths,omitempty"`
	// ResultPath locates the outputs of a succeeded job: a URL or a list
	// of URLs, [*] selecting across lists (default none).
	ResultPath string `json:"result_path,omitempty"`
	// OutputPath, when the answer names no output, is a request path,
	// with {id}, whose URL on the base URL is a succeeded job's output
	// (OpenAI-style /videos/{id}/content, fetched with the route's
	// credential) (default none).
	OutputPath string `json:"output_path,omitempty"`
	// ExpiresAtPath locates the time a succeeded job's outputs expire, in
	// TimeFormat (OpenAI-style expires_at); it takes precedence over
	// OutputsTTL, and a job read after it is expired (default none).
	ExpiresAtPath string `json:"expires_at_path,omitempty"`
	// CreatedAtPath, StartedAtPath and CompletedAtPath locate the
	// provider's times (default none). The completion time is read for
	// terminal jobs only.
	CreatedAtPath   string `json:"created_at_path,omitempty"`
	StartedAtPath   string `json:"started_at_path,omitempty"`
	CompletedAtPath string `json:"completed_at_path,omitempty"`
	// TimeFormat is how times are written: rfc3339 (default), unix
	// (seconds), unix_ms, or a Go layout read as UTC.
	TimeFormat string `json:"time_format,omitempty"`
	// CacheBuster, when set, is a query parameter given a fresh value on
	// every status call, for gateways that cache GETs by URL (default
	// none).
	CacheBuster string `json:"cache_buster,omitempty"`
}

// FollowUpCall is the call made once a job succeeded, for its outputs.
type FollowUpCall struct {
	// Method is the HTTP method (default GET).
	Method string `json:"method,omitempty"`
	// Path is the request path; it may use {id}, {model}, {endpoint} and
	// the names of Params. Required.
	Path string `json:"path"`
	// Params name values of the status answer for the path:
	// {"file_id": "file_id"} fills {file_id} from the answer's file_id.
	Params map[string]string `json:"params,omitempty"`
	// ResultPath locates the outputs in the follow-up's answer. Required.
	ResultPath string `json:"result_path"`
}

// CancelCall is the call that cancels a job.
type CancelCall struct {
	// Method is the HTTP method (default POST).
	Method string `json:"method,omitempty"`
	// Path is the request path; it may use {id}, {model} and {endpoint}.
	// Required.
	Path string `json:"path"`
	// State is what a 2xx answer means: "canceled", or "" (the default)
	// when the answer says nothing final and polling tells.
	State string `json:"state,omitempty"`
}

// BodyErrors reads errors reported inside 2xx answers.
type BodyErrors struct {
	// CodePath locates the error code. Required.
	CodePath string `json:"code_path"`
	// MessagePath locates its message (default none).
	MessagePath string `json:"message_path,omitempty"`
	// OK lists the codes that mean success (default ["0"]). An answer
	// without a code is not an error.
	OK []string `json:"ok,omitempty"`
	// Classes map codes to what they mean: transient, rate_limited, auth,
	// invalid, not_found, or failed (the job failed: invalid input at
	// submit, a failed job at status).
	Classes map[string]string `json:"classes,omitempty"`
	// Default is the class of codes not in Classes (default transient).
	Default string `json:"default,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("15s").
type Duration time.Duration

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"15s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("duration %s is negative", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// outcome is what a raw status value means.
type outcome struct {
	state    state.State
	notFound bool
}

// errClass is what a body error code means.
type errClass struct {
	class  provider.Class
	failed bool
}

// config is Options compiled and checked.
type config struct {
	base       string
	authHeader string
	authFormat string
	jwtTTL     time.Duration // 0: the token is sent as given
	headers    http.Header
	endpoint   string

	submitMethod  string
	submitPath    template
	submitHeaders http.Header
	inputField    string
	modelField    string
	idPath        Path

	statusMethod  string
	statusPath    template
	statePath     Path
	progressPath  Path
	progressScale float64
	queuePath     Path
	etaPath       Path
	reasonPaths   []Path
	resultPath    Path
	outputPath    *template
	expiresAt     Path
	createdAt     Path
	startedAt     Path
	completedAt   Path
	timeFormat    string
	cacheBuster   string

	states     map[string]outcome
	followUp   *followUpSpec
	cancel     *cancelSpec
	callback   *callbackSpec
	errors     *errorSpec
	pollFloor  time.Duration
	outputsTTL time.Duration
	expire404  bool
}

type callbackSpec struct {
	urlField string
	idPath   Path
	signed   bool // Standard Webhooks
}

type followUpSpec struct {
	method string
	path   template
	params map[string]Path
	result Path
}

type cancelSpec struct {
	method string
	path   template
	state  state.State // Canceled, or Unknown
}

type errorSpec struct {
	code    Path
	message Path
	ok      map[string]bool
	classes map[string]errClass
	def     errClass
}

// decodeOptions reads options strictly: an unknown field is an error that
// names it.
func decodeOptions(raw json.RawMessage) (Options, error) {
	var o Options
	if len(bytes.TrimSpace(raw)) == 0 {
		return o, errors.New("options: required (submit, status and states at least)")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return o, fmt.Errorf("options: %w", err)
	}
	return o, nil
}

var (
	headerNameRe = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+.^_` + "`" + `|~-]{1,64}$`)
	fieldRe      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	valueRe      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// compile checks the options and compiles them; baseOverride is the
// route's base_url. Errors name the option.
func compile(o Options, baseOverride string) (*config, error) {
	c := &config{
		endpoint:      o.DefaultEndpoint,
		pollFloor:     time.Duration(o.PollFloor),
		outputsTTL:    time.Duration(o.OutputsTTL),
		inputField:    o.Submit.InputField,
		modelField:    o.Submit.ModelField,
		progressScale: cmp.Or(o.Status.ProgressScale, 1),
		cacheBuster:   o.Status.CacheBuster,
	}
	var err error
	if c.base, err = baseURL(cmp.Or(baseOverride, o.BaseURL)); err != nil {
		return nil, err
	}
	if err := c.compileAuth(o.Auth); err != nil {
		return nil, err
	}
	if c.headers, err = headers("options.headers", o.Headers); err != nil {
		return nil, err
	}
	if c.endpoint != "" && !valueRe.MatchString(c.endpoint) {
		return nil, fmt.Errorf("options.default_endpoint: %q is not a path segment", c.endpoint)
	}
	if err := c.compileSubmit(o.Submit); err != nil {
		return nil, err
	}
	if err := c.compileStatus(o.Status); err != nil {
		return nil, err
	}
	if c.states, err = states(o.States); err != nil {
		return nil, err
	}
	if o.FollowUp != nil {
		if c.followUp, err = compileFollowUp(*o.FollowUp); err != nil {
			return nil, err
		}
	}
	if o.Cancel != nil {
		if c.cancel, err = compileCancel(*o.Cancel); err != nil {
			return nil, err
		}
	}
	if o.Errors != nil {
		if c.errors, err = compileErrors(*o.Errors); err != nil {
			return nil, err
		}
	}
	if cb := o.Callback; cb != nil {
		if c.callback, err = compileCallback(*cb); err != nil {
			return nil, err
		}
	}
	switch o.HTTP404 {
	case "", "not_found":
	case "expired":
		c.expire404 = true
	default:
		return nil, fmt.Errorf("options.http_404_is: %q is not not_found or expired", o.HTTP404)
	}
	return c, nil
}

func baseURL(s string) (string, error) {
	if s == "" {
		return "", errors.New("options.base_url: required (or the route's base_url)")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("options.base_url: %q is not an http(s) URL without credentials, query or fragment", s)
	}
	return strings.TrimRight(s, "/"), nil
}

func (c *config) compileAuth(a Auth) error {
	c.authHeader = cmp.Or(a.Header, "Authorization")
	c.authFormat = cmp.Or(a.Format, "Bearer {token}")
	if !headerNameRe.MatchString(c.authHeader) {
		return fmt.Errorf("options.auth.header: %q is not a header name", c.authHeader)
	}
	if strings.Count(c.authFormat, "{token}") != 1 || strings.ContainsAny(c.authFormat, "\r\n") {
		return fmt.Errorf("options.auth.format: %q must contain {token} once, on one line", c.authFormat)
	}
	if a.JWT != nil {
		c.jwtTTL = cmp.Or(time.Duration(a.JWT.TTL), 30*time.Minute)
		if c.jwtTTL < time.Minute {
			return errors.New("options.auth.jwt.ttl: at least 1m")
		}
	}
	return nil
}

func headers(field string, m map[string]string) (http.Header, error) {
	h := http.Header{}
	for k, v := range m {
		if !headerNameRe.MatchString(k) {
			return nil, fmt.Errorf("%s: %q is not a header name", field, k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, fmt.Errorf("%s.%s: the value must be one line", field, k)
		}
		h.Set(k, v)
	}
	return h, nil
}

func method(field, m, def string) (string, error) {
	m = cmp.Or(m, def)
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return m, nil
	}
	return "", fmt.Errorf("%s: %q is not GET, POST, PUT, PATCH or DELETE", field, m)
}

// jsonPath compiles an option holding a JSON path.
func jsonPath(field, s string, required bool) (Path, error) {
	if s == "" {
		if required {
			return Path{}, fmt.Errorf("%s: required", field)
		}
		return Path{}, nil
	}
	p, err := ParsePath(s)
	if err != nil {
		return Path{}, fmt.Errorf("%s: %w", field, err)
	}
	return p, nil
}

// pathTemplate compiles an option holding a request path.
func pathTemplate(field, s string, allowed map[string]bool) (template, error) {
	if s == "" {
		return template{}, fmt.Errorf("%s: required", field)
	}
	t, err := parseTemplate(s, allowed)
	if err != nil {
		return template{}, fmt.Errorf("%s: %w", field, err)
	}
	return t, nil
}

var (
	submitVars = map[string]bool{"model": true, "endpoint": true}
	jobVars    = map[string]bool{"id": true, "model": true, "endpoint": true}
)

func (c *config) compileSubmit(s SubmitCall) error {
	var err error
	if c.submitMethod, err = method("options.submit.method", s.Method, http.MethodPost); err != nil {
		return err
	}
	if c.submitPath, err = pathTemplate("options.submit.path", s.Path, submitVars); err != nil {
		return err
	}
	if c.submitHeaders, err = headers("options.submit.headers", s.Headers); err != nil {
		return err
	}
	for field, v := range map[string]string{"input_field": s.InputField, "model_field": s.ModelField} {
		if v != "" && !fieldRe.MatchString(v) {
			return fmt.Errorf("options.submit.%s: %q is not a field name", field, v)
		}
	}
	if s.InputField != "" && s.InputField == s.ModelField {
		return errors.New("options.submit.model_field: the same field as input_field")
	}
	c.idPath, err = jsonPath("options.submit.id_path", s.IDPath, true)
	return err
}

func (c *config) compileStatus(s StatusCall) error {
	var err error
	if c.statusMethod, err = method("options.status.method", s.Method, http.MethodGet); err != nil {
		return err
	}
	if c.statusPath, err = pathTemplate("options.status.path", s.Path, jobVars); err != nil {
		return err
	}
	for _, p := range []struct {
		field, text string
		dst         *Path
		required    bool
	}{
		{"state_path", s.StatePath, &c.statePath, true},
		{"progress_path", s.ProgressPath, &c.progressPath, false},
		{"queue_position_path", s.QueuePositionPath, &c.queuePath, false},
		{"eta_path", s.ETAPath, &c.etaPath, false},
		{"result_path", s.ResultPath, &c.resultPath, false},
		{"expires_at_path", s.ExpiresAtPath, &c.expiresAt, false},
		{"created_at_path", s.CreatedAtPath, &c.createdAt, false},
		{"started_at_path", s.StartedAtPath, &c.startedAt, false},
		{"completed_at_path", s.CompletedAtPath, &c.completedAt, false},
	} {
		if *p.dst, err = jsonPath("options.status."+p.field, p.text, p.required); err != nil {
			return err
		}
	}
	for i, r := range s.ReasonPaths {
		p, err := jsonPath(fmt.Sprintf("options.status.reason_paths[%d]", i), r, true)
		if err != nil {
			return err
		}
		c.reasonPaths = append(c.reasonPaths, p)
	}
	if s.OutputPath != "" {
		t, err := pathTemplate("options.status.output_path", s.OutputPath, map[string]bool{"id": true})
		if err != nil {
			return err
		}
		c.outputPath = &t
	}
	if s.ProgressScale < 0 {
		return errors.New("options.status.progress_scale: must be positive")
	}
	c.timeFormat = cmp.Or(s.TimeFormat, "rfc3339")
	if strings.ContainsAny(c.timeFormat, "\r\n") || len(c.timeFormat) > 64 {
		return fmt.Errorf("options.status.time_format: %q is not a format", c.timeFormat)
	}
	if s.CacheBuster != "" && !fieldRe.MatchString(s.CacheBuster) {
		return fmt.Errorf("options.status.cache_buster: %q is not a parameter name", s.CacheBuster)
	}
	return nil
}

func states(m map[string]string) (map[string]outcome, error) {
	if len(m) == 0 {
		return nil, errors.New("options.states: required (raw value: queued|running|succeeded|failed|canceled|expired|unknown|not_found)")
	}
	out := make(map[string]outcome, len(m))
	for raw, norm := range m {
		switch s := state.State(norm); s {
		case state.Queued, state.Running, state.Succeeded, state.Failed, state.Canceled, state.Expired, state.Unknown:
			out[raw] = outcome{state: s}
		case "not_found":
			out[raw] = outcome{state: state.Unknown, notFound: true}
		default:
			return nil, fmt.Errorf("options.states.%s: %q is not queued, running, succeeded, failed, canceled, expired, unknown or not_found", raw, norm)
		}
	}
	return out, nil
}

func compileCallback(cb CallbackCall) (*callbackSpec, error) {
	spec := &callbackSpec{urlField: cb.URLField}
	switch cb.Signature {
	case "":
		if cb.URLField == "" {
			return nil, errors.New("options.callback.url_field: required for unsigned callbacks")
		}
	case "standard_webhooks":
		spec.signed = true
	default:
		return nil, fmt.Errorf("options.callback.signature: %q is not standard_webhooks or empty (unsigned)", cb.Signature)
	}
	if cb.URLField != "" && !fieldRe.MatchString(cb.URLField) {
		return nil, fmt.Errorf("options.callback.url_field: %q is not a field name", cb.URLField)
	}
	p, err := ParsePath(cb.IDPath)
	if err != nil {
		return nil, fmt.Errorf("options.callback.id_path: %w", err)
	}
	spec.idPath = p
	return spec, nil
}

func compileFollowUp(f FollowUpCall) (*followUpSpec, error) {
	fu := &followUpSpec{params: map[string]Path{}}
	allowed := map[string]bool{"id": true, "model": true, "endpoint": true}
	for name, text := range f.Params {
		if !placeholderRe.MatchString(name) || allowed[name] {
			return nil, fmt.Errorf("options.follow_up.params: %q is not a free placeholder name", name)
		}
		p, err := jsonPath("options.follow_up.params."+name, text, true)
		if err != nil {
			return nil, err
		}
		fu.params[name] = p
		allowed[name] = true
	}
	var err error
	if fu.method, err = method("options.follow_up.method", f.Method, http.MethodGet); err != nil {
		return nil, err
	}
	if fu.path, err = pathTemplate("options.follow_up.path", f.Path, allowed); err != nil {
		return nil, err
	}
	if fu.result, err = jsonPath("options.follow_up.result_path", f.ResultPath, true); err != nil {
		return nil, err
	}
	return fu, nil
}

func compileCancel(cc CancelCall) (*cancelSpec, error) {
	c := &cancelSpec{state: state.Unknown}
	var err error
	if c.method, err = method("options.cancel.method", cc.Method, http.MethodPost); err != nil {
		return nil, err
	}
	if c.path, err = pathTemplate("options.cancel.path", cc.Path, jobVars); err != nil {
		return nil, err
	}
	switch cc.State {
	case "":
	case string(state.Canceled):
		c.state = state.Canceled
	default:
		return nil, fmt.Errorf("options.cancel.state: %q is not canceled or empty", cc.State)
	}
	return c, nil
}

func compileErrors(e BodyErrors) (*errorSpec, error) {
	be := &errorSpec{ok: map[string]bool{}, classes: map[string]errClass{}}
	var err error
	if be.code, err = jsonPath("options.errors.code_path", e.CodePath, true); err != nil {
		return nil, err
	}
	if be.message, err = jsonPath("options.errors.message_path", e.MessagePath, false); err != nil {
		return nil, err
	}
	okCodes := e.OK
	if len(okCodes) == 0 {
		okCodes = []string{"0"}
	}
	for _, c := range okCodes {
		be.ok[c] = true
	}
	for code, name := range e.Classes {
		cl, err := parseClass("options.errors.classes."+code, name)
		if err != nil {
			return nil, err
		}
		be.classes[code] = cl
	}
	if be.def, err = parseClass("options.errors.default", cmp.Or(e.Default, "transient")); err != nil {
		return nil, err
	}
	return be, nil
}

func parseClass(field, name string) (errClass, error) {
	switch name {
	case "transient":
		return errClass{class: provider.Transient}, nil
	case "rate_limited":
		return errClass{class: provider.RateLimited}, nil
	case "auth":
		return errClass{class: provider.Auth}, nil
	case "invalid":
		return errClass{class: provider.Invalid}, nil
	case "not_found":
		return errClass{class: provider.NotFound}, nil
	case "failed":
		return errClass{class: provider.Invalid, failed: true}, nil
	}
	return errClass{}, fmt.Errorf("%s: %q is not transient, rate_limited, auth, invalid, not_found or failed", field, name)
}
