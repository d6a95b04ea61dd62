package tracing

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pollux-dev/pollux/internal/platform/version"
)

// Scope is the instrumentation scope of Pollux's spans.
const Scope = "github.com/pollux-dev/pollux"

// Header is the W3C trace context header Pollux reads and writes.
const Header = "traceparent"

// Tracer makes Pollux's spans. A nil *Tracer is tracing off: every method
// returns at once, and Start returns a nil span.
type Tracer struct {
	tracer trace.Tracer
	prop   propagation.TraceContext
}

// New returns a Tracer making spans with tp; nil (tracing off) when tp is
// nil or a no-op provider.
func New(tp trace.TracerProvider) *Tracer {
	switch tp.(type) {
	case nil, noop.TracerProvider, *noop.TracerProvider:
		return nil
	}
	return &Tracer{tracer: tp.Tracer(Scope, trace.WithInstrumentationVersion(version.Get().Version))}
}

// Start starts a span of a job whose trace context is job (its
// traceparent; "" when the job has none). The span is a child of ctx's
// span when that span is in the job's trace (or the job has none), else a
// child of the job's context: every span about a job lands in its trace,
// whoever's span ctx carries. With neither, the span is a root (as it is
// with trace.WithNewRoot among opts). On a nil Tracer it returns ctx and a
// nil span (see End).
func (t *Tracer) Start(ctx context.Context, job, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if t == nil {
		return ctx, nil
	}
	if js := Parse(job); js.IsValid() {
		if cur := trace.SpanContextFromContext(ctx); !cur.IsValid() || cur.TraceID() != js.TraceID() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, js)
		}
	}
	return t.tracer.Start(ctx, name, opts...)
}

// End ends span (nil: tracing off, nothing to do), with an error status
// when err is not nil.
func End(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		Fail(span, err)
	}
	span.End()
}

// Fail marks span failed with err.
func Fail(span trace.Span, err error) {
	if span == nil || err == nil {
		return
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// Inject writes the context of ctx's span into h as a traceparent (and
// tracestate) header, replacing any there, in whatever spelling. It does
// nothing on a nil Tracer or a nil h.
func (t *Tracer) Inject(ctx context.Context, h map[string][]string) {
	if t == nil || h == nil {
		return
	}
	for k := range h {
		if strings.EqualFold(k, Header) || strings.EqualFold(k, "tracestate") {
			delete(h, k) // a context from elsewhere (a provider's) is not ours
		}
	}
	t.prop.Inject(ctx, carrier(h))
}

// Extract returns ctx with the remote span context of h's traceparent
// header, read case-insensitively (a NATS header is case-sensitive, and
// clients write it either way); ctx as it is on a nil Tracer.
func (t *Tracer) Extract(ctx context.Context, h map[string][]string) context.Context {
	if t == nil || len(h) == 0 {
		return ctx
	}
	return t.prop.Extract(ctx, carrier(h))
}

// ExtractHTTP is Extract for an HTTP request's headers.
func (t *Tracer) ExtractHTTP(ctx context.Context, h http.Header) context.Context {
	if t == nil {
		return ctx
	}
	return t.prop.Extract(ctx, propagation.HeaderCarrier(h))
}

// Traceparent is the W3C traceparent of ctx's span ("" when it has none):
// what a job's record keeps of its trace.
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// Parse is the span context of a W3C traceparent, invalid when s is not
// one.
func Parse(s string) trace.SpanContext {
	if s == "" {
		return trace.SpanContext{}
	}
	// Version 00, as Traceparent writes it: parsed in place, for it is
	// parsed at every poll (by the propagator's rules).
	if len(s) == 55 && s[:3] == "00-" && s[35] == '-' && s[52] == '-' {
		var c trace.SpanContextConfig
		ok := hexBytes(c.TraceID[:], s[3:35]) && hexBytes(c.SpanID[:], s[36:52])
		var flags [1]byte
		if !ok || !hexBytes(flags[:], s[53:55]) || flags[0] > 3 {
			return trace.SpanContext{}
		}
		c.TraceFlags = trace.TraceFlags(flags[0]) & (trace.FlagsSampled | trace.FlagsRandom)
		c.Remote = true
		if sc := trace.NewSpanContext(c); sc.IsValid() {
			return sc
		}
		return trace.SpanContext{}
	}
	var tc propagation.TraceContext
	return trace.SpanContextFromContext(tc.Extract(context.Background(), propagation.MapCarrier{Header: s}))
}

// hexBytes decodes lowercase hex src into dst (len(src) == 2*len(dst)).
func hexBytes(dst []byte, src string) bool {
	for i := range dst {
		hi, ok1 := hexDigit(src[2*i])
		lo, ok2 := hexDigit(src[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// Remote is the span context of h's traceparent header (invalid when it
// has none): what a stored message says of the span that stored it.
func (t *Tracer) Remote(h map[string][]string) trace.SpanContext {
	if t == nil || len(h) == 0 {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(t.prop.Extract(context.Background(), carrier(h)))
}

// carrier is a NATS (or HTTP) header as a propagation carrier. Keys are
// found case-insensitively; a key is written as the propagator names it
// ("traceparent", the W3C name), replacing any spelling of it.
type carrier map[string][]string

func (c carrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	for k, v := range c {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}

func (c carrier) Set(key, value string) {
	for k := range c {
		if k != key && strings.EqualFold(k, key) {
			delete(c, k)
		}
	}
	c[key] = []string{value}
}

func (c carrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
