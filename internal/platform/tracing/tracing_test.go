package tracing_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/pollux-dev/pollux/internal/platform/tracing"
)

func recorder(t *testing.T) (*tracing.Tracer, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tracing.New(tp), exp
}

func TestNewIsNilWhenOff(t *testing.T) {
	t.Parallel()
	require.Nil(t, tracing.New(nil))
	require.Nil(t, tracing.New(noop.NewTracerProvider()))
	tp := noop.NewTracerProvider()
	require.Nil(t, tracing.New(&tp))
	require.NotNil(t, tracing.New(sdktrace.NewTracerProvider()))
}

// Tracing off costs a nil check: no span, no header read or written, no
// allocation (what the poller's quiet polls rely on).
func TestOffAllocatesNothing(t *testing.T) {
	var off *tracing.Tracer
	ctx := context.Background()
	h := nats.Header{}
	allocs := testing.AllocsPerRun(1000, func() {
		sctx, span := off.Start(ctx, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "poll")
		off.Inject(sctx, h)
		_ = off.Extract(sctx, h)
		_ = off.Remote(h)
		tracing.End(span, nil)
	})
	require.Zero(t, allocs)
	require.Empty(t, h, "no header written")
}

func TestTraceparentRoundTrip(t *testing.T) {
	t.Parallel()
	tr, _ := recorder(t)
	ctx, span := tr.Start(context.Background(), "", "root")
	defer span.End()
	tp := tracing.Traceparent(ctx)
	require.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`, tp)
	require.Equal(t, span.SpanContext().TraceID(), tracing.Parse(tp).TraceID())
	require.Equal(t, span.SpanContext().SpanID(), tracing.Parse(tp).SpanID())
	require.True(t, tracing.Parse(tp).IsRemote())
	require.False(t, tracing.Parse("").IsValid())
	require.False(t, tracing.Parse("not a traceparent").IsValid())
	require.Empty(t, tracing.Traceparent(context.Background()))
}

// A job's spans land in its trace: under ctx's span when that is in the
// job's trace, else under the job's context; a job without one gets a
// root, or ctx's span's child.
func TestStartParents(t *testing.T) {
	t.Parallel()
	tr, _ := recorder(t)
	jobCtx, job := tr.Start(context.Background(), "", "intake")
	defer job.End()
	jobTP := tracing.Traceparent(jobCtx)

	_, poll := tr.Start(context.Background(), jobTP, "poll")
	requireParent(t, job, poll)

	pollCtx, poll2 := tr.Start(context.Background(), jobTP, "poll")
	_, ev := tr.Start(pollCtx, jobTP, "event succeeded")
	requireParent(t, poll2, ev)

	otherCtx, other := tr.Start(context.Background(), "", "another job's")
	_, sp := tr.Start(otherCtx, jobTP, "poll")
	requireParent(t, job, sp)

	_, root := tr.Start(context.Background(), "", "poll of a job without a trace")
	require.False(t, root.(sdktrace.ReadOnlySpan).Parent().IsValid())
	_, newRoot := tr.Start(jobCtx, "", "receipt", trace.WithNewRoot())
	require.False(t, newRoot.(sdktrace.ReadOnlySpan).Parent().IsValid())
	for _, s := range []trace.Span{poll, poll2, ev, other, sp, root, newRoot} {
		s.End()
	}
}

func requireParent(t *testing.T, parent, child trace.Span) {
	t.Helper()
	p := child.(sdktrace.ReadOnlySpan).Parent()
	require.Equal(t, parent.SpanContext().TraceID(), child.SpanContext().TraceID())
	require.Equal(t, parent.SpanContext().SpanID(), p.SpanID())
}

// NATS headers are case-sensitive and clients write traceparent either
// way: it is read in any spelling, written as the W3C name, and a context
// already there (a provider's) is replaced.
func TestHeaders(t *testing.T) {
	t.Parallel()
	tr, _ := recorder(t)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, key := range []string{"traceparent", "Traceparent", "TRACEPARENT"} {
		ctx := tr.Extract(context.Background(), nats.Header{key: {tp}})
		require.Equal(t, tp, tracing.Traceparent(ctx), key)
		require.Equal(t, tracing.Parse(tp), tr.Remote(nats.Header{key: {tp}}), key)
	}
	ctx := tr.ExtractHTTP(context.Background(), http.Header{"Traceparent": {tp}})
	require.Equal(t, tp, tracing.Traceparent(ctx))

	h := nats.Header{"Traceparent": {"00-11111111111111111111111111111111-1111111111111111-01"}, "Tracestate": {"vendor=x"}, "Other": {"y"}}
	tr.Inject(ctx, h)
	require.Equal(t, nats.Header{"traceparent": {tp}, "Other": {"y"}}, h)
}

// Parse reads what the propagator reads, the fast way for version 00.
func TestParseAgreesWithThePropagator(t *testing.T) {
	t.Parallel()
	var tc propagation.TraceContext
	for _, s := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	} {
		want := trace.SpanContextFromContext(tc.Extract(context.Background(), propagation.MapCarrier{tracing.Header: s}))
		require.Equal(t, want, tracing.Parse(s), s)
	}
}
