package generic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/httpapi"
	"github.com/pollux-dev/pollux/pkg/signature"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Kind is the adapter kind in route configuration.
const Kind = "generic"

// Adapter talks to one account of an HTTP API its Options describe.
type Adapter struct {
	cfg       *config
	api       httpapi.Client
	token     string
	accessKey string // with secretKey, when tokens are minted JWTs
	secretKey string
	verifier  *signature.Verifier // signed callbacks only
	now       func() time.Time
}

// New builds an adapter from a route's configuration.
func New(cfg provider.Config) (provider.Adapter, error) {
	return NewAdapter(cfg)
}

// NewAdapter builds an adapter and returns its concrete type.
func NewAdapter(cfg provider.Config) (*Adapter, error) {
	o, err := decodeOptions(cfg.Options)
	if err != nil {
		return nil, err
	}
	c, err := compile(o, cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if cfg.Token == "" {
		return nil, errors.New("token: required")
	}
	a := &Adapter{cfg: c, token: cfg.Token, now: time.Now}
	switch signed := c.callback != nil && c.callback.signed; {
	case signed && cfg.WebhookSecret == "":
		return nil, errors.New("webhook secret: required by options.callback.signature (the whsec_ secret the provider signs with)")
	case signed:
		v, err := signature.NewVerifier(cfg.WebhookSecret)
		if err != nil {
			return nil, fmt.Errorf("webhook secret: %w", err)
		}
		v.Now = func() time.Time { return a.now() }
		a.verifier = v
	case cfg.WebhookSecret != "":
		return nil, errors.New("webhook secret: set only with options.callback.signature (unsigned callbacks take none)")
	}
	if c.jwtTTL > 0 {
		ak, sk, ok := strings.Cut(cfg.Token, ":")
		if !ok || ak == "" || sk == "" {
			return nil, errors.New("token: options.auth.jwt needs the token as <access key>:<secret key>")
		}
		a.accessKey, a.secretKey = ak, sk
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = httpapi.NewHTTPClient()
	}
	a.api = httpapi.Client{BaseURL: c.base, HTTP: hc, Authorize: a.authorize}
	return a, nil
}

// authorize adds the credential to a request.
func (a *Adapter) authorize(r *http.Request) {
	tok := a.token
	if a.cfg.jwtTTL > 0 {
		tok = mintJWT(a.accessKey, a.secretKey, a.now(), a.cfg.jwtTTL)
	}
	r.Header.Set(a.cfg.authHeader, strings.Replace(a.cfg.authFormat, "{token}", tok, 1))
}

// Info describes the configured provider: cancel when a cancel call is
// configured, unsigned callbacks or signed webhooks as configured, no
// idempotency key, the configured poll floor.
func (a *Adapter) Info() provider.Info {
	cb := a.cfg.callback
	return provider.Info{Kind: Kind, Cancel: a.cfg.cancel != nil, Callbacks: cb != nil && !cb.signed,
		Webhooks: cb != nil && cb.signed, WebhooksByRemoteID: cb != nil && cb.signed && cb.urlField == "",
		PollFloor: a.cfg.pollFloor}
}

// VerifyWebhook checks a signed callback's Standard Webhooks signature and
// returns its webhook-id.
func (a *Adapter) VerifyWebhook(_ context.Context, h http.Header, body []byte) (string, error) {
	if a.verifier == nil {
		return "", fmt.Errorf("%w: this route takes no signed callbacks", provider.ErrSignature)
	}
	id, err := a.verifier.Verify(h, body)
	if err != nil {
		return "", provider.VerifyError(err)
	}
	return id, nil
}

// ParseWebhook reads which job a verified callback is about and nothing
// else: the status is unknown, so Pollux checks the job now. Even a signed
// "completed" is confirmed by a status call, which is where the outputs
// and their expiry are.
func (a *Adapter) ParseWebhook(_ http.Header, body []byte) (provider.Status, error) {
	id, err := a.CallbackRemoteID(body)
	if err != nil {
		return provider.Status{}, err
	}
	st := provider.Status{RemoteID: id}
	st.State = state.Unknown
	return st, nil
}

// CallbackRemoteID reads which job an (unsigned) callback is about.
func (a *Adapter) CallbackRemoteID(body []byte) (string, error) {
	if a.cfg.callback == nil {
		return "", fmt.Errorf("%w: this route takes no callbacks", provider.ErrMalformed)
	}
	doc, err := decode(body)
	if err != nil {
		return "", fmt.Errorf("%w: %w", provider.ErrMalformed, err)
	}
	v, _ := a.cfg.callback.idPath.First(doc)
	id, _ := scalar(v)
	if !plainRe.MatchString(id) {
		return "", fmt.Errorf("%w: no usable job id at %s", provider.ErrMalformed, a.cfg.callback.idPath)
	}
	return id, nil
}

// vars are the placeholder values of a job: its model, split into
// endpoint and model, and its id.
func (a *Adapter) vars(model, id string) map[string]string {
	endpoint, name, ok := strings.Cut(model, ":")
	if !ok {
		endpoint, name = a.cfg.endpoint, model
	}
	return map[string]string{"model": name, "endpoint": endpoint, "id": id}
}

// Submit creates a job.
func (a *Adapter) Submit(ctx context.Context, req provider.SubmitRequest) (provider.Status, error) {
	vals := a.vars(req.Model, "")
	p, err := a.cfg.submitPath.render(vals)
	if err != nil {
		return provider.Status{}, &provider.Error{Class: provider.Invalid, Message: "model " + strconv.Quote(clip(req.Model, 200)) + ": " + err.Error()}
	}
	body, err := a.body(req.Input, vals["model"], req.WebhookURL)
	if err != nil {
		return provider.Status{}, err
	}
	resp, err := a.do(ctx, a.cfg.submitMethod, p, body, a.cfg.submitHeaders)
	if err != nil {
		return provider.Status{}, err
	}
	doc, err := decode(resp.Body)
	if err != nil {
		return provider.Status{}, err
	}
	if _, perr := a.bodyError(doc); perr != nil {
		return provider.Status{}, perr // a failed job at submit is invalid input
	}
	v, _ := a.cfg.idPath.First(doc)
	id, _ := scalar(v)
	if !plainRe.MatchString(id) {
		return provider.Status{}, &provider.Error{Class: provider.Transient,
			Message: fmt.Sprintf("submit answer without a usable job id at %s", a.cfg.idPath)}
	}
	st := provider.Status{RemoteID: id}
	st.State = state.Queued
	return st, nil
}

// body builds the submit body from the job's input object, with the
// callback URL when the provider is to call one.
func (a *Adapter) body(input json.RawMessage, model, callbackURL string) ([]byte, error) {
	fields := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(input)) > 0 {
		if err := json.Unmarshal(input, &fields); err != nil || fields == nil {
			return nil, &provider.Error{Class: provider.Invalid, Message: "input must be a JSON object"}
		}
	}
	if a.cfg.inputField != "" {
		in, _ := json.Marshal(fields) // decoded JSON: cannot fail
		fields = map[string]json.RawMessage{a.cfg.inputField: in}
	}
	if cb := a.cfg.callback; cb != nil && cb.urlField != "" && callbackURL != "" {
		u, _ := json.Marshal(callbackURL) // a string: cannot fail
		fields[cb.urlField] = u
	}
	if f := a.cfg.modelField; f != "" {
		if !plainRe.MatchString(model) {
			return nil, &provider.Error{Class: provider.Invalid, Message: fmt.Sprintf("model %q is not a plain model id", clip(model, 200))}
		}
		m, _ := json.Marshal(model) // a string: cannot fail
		if prev, ok := fields[f]; ok && !bytes.Equal(bytes.TrimSpace(prev), m) {
			return nil, &provider.Error{Class: provider.Invalid, Message: "input." + f + " differs from the job's model"}
		}
		fields[f] = m
	}
	return json.Marshal(fields)
}

// Status reads a job and, once it succeeded, its follow-up.
func (a *Adapter) Status(ctx context.Context, ref provider.Ref) (provider.Status, error) {
	vals := a.vars(ref.Model, ref.ID)
	p, err := a.cfg.statusPath.render(vals)
	if err != nil {
		return provider.Status{}, &provider.Error{Class: provider.Invalid, Message: err.Error()}
	}
	if a.cfg.cacheBuster != "" {
		sep := "?"
		if strings.Contains(p, "?") {
			sep = "&"
		}
		p += sep + a.cfg.cacheBuster + "=" + strconv.FormatInt(a.now().UnixNano(), 10)
	}
	resp, err := a.do(ctx, a.cfg.statusMethod, p, nil, nil)
	if err != nil {
		var pe *provider.Error
		if a.cfg.expire404 && errors.As(err, &pe) && pe.HTTPStatus == http.StatusNotFound {
			st := provider.Status{RemoteID: ref.ID}
			st.State, st.Reason = state.Expired, "the provider no longer knows the job (HTTP 404)"
			return st, nil
		}
		return provider.Status{}, err
	}
	doc, err := decode(resp.Body)
	if err != nil {
		return provider.Status{}, err
	}
	st, err := a.interpret(doc, ref.ID)
	if err != nil {
		return provider.Status{}, err
	}
	st.PollAfter = httpapi.PollAfter(resp.Header, a.now())
	if st.State == state.Succeeded && a.cfg.followUp != nil {
		if st, err = a.follow(ctx, vals, doc, st); err != nil {
			return provider.Status{}, err
		}
	}
	if a.cfg.outputsTTL > 0 && len(st.Outputs) > 0 && st.OutputsExpireAt.IsZero() {
		// From completion, else creation (earlier, so never too late), else
		// from now, when Pollux learned of the outputs.
		from := st.CompletedAt
		if from.IsZero() {
			from = st.CreatedAt
		}
		if from.IsZero() {
			from = a.now().UTC()
		}
		st.OutputsExpireAt = from.Add(a.cfg.outputsTTL)
	}
	return st, nil
}

// interpret maps a status answer: the error it reports, else its status.
func (a *Adapter) interpret(doc any, id string) (provider.Status, error) {
	if failed, err := a.statusError(doc, id); failed != nil || err != nil {
		return deref(failed), err
	}
	return a.parse(doc, id)
}

// statusError turns an error reported in a status or follow-up answer into
// the call's outcome: a failed job or an error; neither when the answer
// reports none.
func (a *Adapter) statusError(doc any, id string) (*provider.Status, error) {
	failed, perr := a.bodyError(doc)
	switch {
	case perr == nil:
		return nil, nil
	case failed:
		st := provider.Status{RemoteID: id}
		raw, _ := scalar(first(a.cfg.statePath, doc))
		st.State, st.Raw, st.Reason = state.Failed, clip(raw, 64), perr.Message
		return &st, nil
	}
	return nil, perr
}

func deref(st *provider.Status) provider.Status {
	if st == nil {
		return provider.Status{}
	}
	return *st
}

// parse maps a status answer.
func (a *Adapter) parse(doc any, id string) (provider.Status, error) {
	st := provider.Status{RemoteID: id}
	raw, _ := scalar(first(a.cfg.statePath, doc))
	st.Raw = clip(raw, 64)
	o, ok := a.cfg.states[raw]
	if !ok {
		st.State = state.Unknown
		return st, nil
	}
	if o.notFound {
		return provider.Status{}, &provider.Error{Class: provider.NotFound,
			Message: fmt.Sprintf("the provider reports %q: it does not know the job", st.Raw)}
	}
	st.State = o.state
	st.CreatedAt = a.readTime(a.cfg.createdAt, doc)
	st.StartedAt = a.readTime(a.cfg.startedAt, doc)
	if st.State.Terminal() {
		st.CompletedAt = a.readTime(a.cfg.completedAt, doc)
	}
	if !st.State.Terminal() {
		st.ETA = a.eta(doc)
	}
	switch st.State {
	case state.Queued:
		st.QueuePosition = a.queuePosition(doc)
	case state.Running:
		st.Progress = a.progress(doc)
	case state.Succeeded:
		if a.cfg.followUp == nil {
			st.Outputs = urls(a.cfg.resultPath.Eval(doc))
		}
		if len(st.Outputs) == 0 && a.cfg.outputPath != nil {
			if p, err := a.cfg.outputPath.render(map[string]string{"id": id}); err == nil {
				st.Outputs = []string{a.cfg.base + p}
			}
		}
		if exp := a.readTime(a.cfg.expiresAt, doc); !exp.IsZero() {
			st.OutputsExpireAt = exp
			if !a.now().Before(exp) {
				st.State = state.Expired
				st.Reason = "the outputs expired at " + exp.Format(time.RFC3339)
				st.Outputs = nil
			}
		}
	case state.Failed, state.Canceled, state.Expired:
		st.Reason = a.reason(doc, st.Raw)
	}
	return st, nil
}

// follow makes the follow-up call of a succeeded job for its outputs.
func (a *Adapter) follow(ctx context.Context, vals map[string]string, doc any, st provider.Status) (provider.Status, error) {
	fu := a.cfg.followUp
	fvals := maps.Clone(vals)
	for name, p := range fu.params {
		v, _ := scalar(first(p, doc))
		if v == "" {
			return provider.Status{}, &provider.Error{Class: provider.Transient,
				Message: fmt.Sprintf("a succeeded job's answer has no %s for the follow-up", p)}
		}
		fvals[name] = v
	}
	p, err := fu.path.render(fvals)
	if err != nil {
		return provider.Status{}, &provider.Error{Class: provider.Transient, Message: "follow-up: " + err.Error()}
	}
	resp, err := a.do(ctx, fu.method, p, nil, nil)
	if err != nil {
		return provider.Status{}, err
	}
	fdoc, err := decode(resp.Body)
	if err != nil {
		return provider.Status{}, err
	}
	if failed, err := a.statusError(fdoc, st.RemoteID); failed != nil || err != nil {
		if failed != nil {
			failed.Raw = st.Raw
		}
		return deref(failed), err
	}
	st.Outputs = urls(fu.result.Eval(fdoc))
	return st, nil
}

// Cancel cancels an unfinished job: it reads the job first and returns a
// finished job's status untouched, as some providers' cancel call deletes
// finished jobs.
func (a *Adapter) Cancel(ctx context.Context, ref provider.Ref) (provider.Status, error) {
	cc := a.cfg.cancel
	if cc == nil {
		return provider.Status{}, provider.ErrUnsupported
	}
	st, err := a.Status(ctx, ref)
	if err != nil {
		return provider.Status{}, err
	}
	if st.State.Terminal() {
		return st, nil
	}
	p, err := cc.path.render(a.vars(ref.Model, ref.ID))
	if err != nil {
		return provider.Status{}, &provider.Error{Class: provider.Invalid, Message: err.Error()}
	}
	resp, err := a.do(ctx, cc.method, p, nil, nil)
	if err != nil {
		return provider.Status{}, err
	}
	if len(bytes.TrimSpace(resp.Body)) > 0 {
		doc, err := decode(resp.Body)
		if err != nil {
			return provider.Status{}, err
		}
		if _, perr := a.bodyError(doc); perr != nil {
			return provider.Status{}, perr
		}
	}
	out := provider.Status{RemoteID: ref.ID}
	out.State = cc.state
	if out.State == state.Canceled {
		out.Reason = "canceled at the provider"
	}
	return out, nil
}

// do makes one call with the configured headers and the call's own.
func (a *Adapter) do(ctx context.Context, method, p string, body []byte, extra http.Header) (*httpapi.Response, error) {
	h := a.cfg.headers.Clone()
	for k, v := range extra {
		h[k] = v
	}
	var b any
	if body != nil {
		b = body
	}
	return a.api.Do(ctx, method, p, b, h)
}

// bodyError reads an error reported inside a 2xx answer: nil when there is
// none; failed says the code means the job failed.
func (a *Adapter) bodyError(doc any) (failed bool, err *provider.Error) {
	be := a.cfg.errors
	if be == nil {
		return false, nil
	}
	code, ok := scalar(first(be.code, doc))
	if !ok || be.ok[code] {
		return false, nil
	}
	cl, known := be.classes[code]
	if !known {
		cl = be.def
	}
	msg, _ := scalar(first(be.message, doc))
	msg = strings.TrimSpace(clip(msg, 1024) + " (code " + clip(code, 32) + ")")
	return cl.failed, &provider.Error{Class: cl.class, Message: msg}
}

func (a *Adapter) progress(doc any) *float64 {
	f, ok := number(first(a.cfg.progressPath, doc))
	if !ok {
		return nil
	}
	p := min(max(f/a.cfg.progressScale, 0), 1)
	return &p
}

// maxETA bounds a provider's estimate of the time left: a larger one is
// not believed.
const maxETA = 24 * time.Hour

// eta reads the provider's estimate of the seconds left; 0 when it gives
// none, or one that is negative or past maxETA.
func (a *Adapter) eta(doc any) time.Duration {
	f, ok := number(first(a.cfg.etaPath, doc))
	if !ok || f <= 0 || f > maxETA.Seconds() {
		return 0
	}
	return time.Duration(f * float64(time.Second))
}

// queuePosition reads a queued job's place, 1 being next; nil when the
// answer gives none (or nonsense).
func (a *Adapter) queuePosition(doc any) *int {
	f, ok := number(first(a.cfg.queuePath, doc))
	if !ok || f < 0 || f > 1e9 || f != math.Trunc(f) {
		return nil
	}
	n := int(f)
	return &n
}

// number is a finite JSON number.
func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

func (a *Adapter) reason(doc any, raw string) string {
	var parts []string
	for _, p := range a.cfg.reasonPaths {
		if s, ok := scalar(first(p, doc)); ok && strings.TrimSpace(s) != "" {
			parts = append(parts, clip(strings.TrimSpace(s), 1024))
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("the provider reported %q", raw)
	}
	return strings.Join(parts, ": ")
}

// readTime reads a provider time; zero when absent, unreadable or implausible.
func (a *Adapter) readTime(p Path, doc any) time.Time {
	v := first(p, doc)
	if v == nil {
		return time.Time{}
	}
	s, _ := scalar(v)
	var t time.Time
	switch a.cfg.timeFormat {
	case "rfc3339":
		t, _ = time.Parse(time.RFC3339Nano, s)
	case "unix", "unix_ms":
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}
		}
		if a.cfg.timeFormat == "unix" {
			t = time.Unix(n, 0)
		} else {
			t = time.UnixMilli(n)
		}
	default:
		t, _ = time.ParseInLocation(a.cfg.timeFormat, s, time.UTC)
	}
	if t.Year() < 2000 || t.Year() > 2200 {
		return time.Time{}
	}
	return t.UTC()
}

// first returns the first value a path selects, nil when none.
func first(p Path, doc any) any {
	v, _ := p.First(doc)
	return v
}

// urls keeps the http(s) URLs among values that are strings or lists of
// strings.
func urls(values []any) []string {
	var out []string
	add := func(v any) {
		s, ok := v.(string)
		if ok && len(out) < provider.MaxOutputs && provider.IsOutputURL(s) {
			if _, err := url.Parse(s); err == nil {
				out = append(out, s)
			}
		}
	}
	for _, v := range values {
		if list, ok := v.([]any); ok {
			for _, e := range list {
				add(e)
			}
			continue
		}
		add(v)
	}
	return out
}

// decode reads a JSON answer, numbers kept as written.
func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, &provider.Error{Class: provider.Transient, Message: "malformed answer", Err: err}
	}
	return doc, nil
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
