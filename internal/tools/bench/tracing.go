package bench

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/pollux-dev/pollux/internal/platform/tracing"
)

// discard is a span exporter that drops what it is handed, counting it:
// tracing's cost to Pollux without a collector's.
type discard struct{ spans atomic.Int64 }

func (d *discard) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	d.spans.Add(int64(len(spans)))
	return nil
}

func (*discard) Shutdown(context.Context) error { return nil }

// benchTracer is tracing on as a process runs it — every span sampled,
// batched by the SDK's default span processor — exporting to a discard
// exporter; stop flushes and shuts it down.
func benchTracer() (t *tracing.Tracer, exported *discard, stop func(context.Context) error) {
	exp := &discard{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	return tracing.New(tp), exp, tp.Shutdown
}

// benchTrace is seeded job i's trace context (sampled), as ingest would
// have stored it.
func benchTrace(i int) string {
	return fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)
}

// pollSpan makes a span as the poller makes one for each poll (its
// attributes, its parent from the job's trace context); with t nil, as
// the poller does with tracing off, nothing but the nil check.
func pollSpan(ctx context.Context, t *tracing.Tracer, job string) {
	if t == nil {
		return
	}
	_, span := t.Start(ctx, job, "poll", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("pollux.route", benchRoute),
		attribute.String("pollux.provider", "instant"),
		attribute.String("pollux.job.id", "bench-0000001"),
		attribute.String("pollux.remote_id", "r-0000001"),
		attribute.String("pollux.model", "bench/model"),
		attribute.Int("pollux.poll", 4),
		attribute.Int64("pollux.delivery", 3),
	))
	span.SetAttributes(
		attribute.String("pollux.state", "running"),
		attribute.Bool("pollux.changed", false),
		attribute.Bool("pollux.quiet", true),
		attribute.Float64("pollux.next_poll_in_s", 0.1),
	)
	span.End()
}
