package jobs

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pollux-dev/pollux/internal/platform/tracing"
	"github.com/pollux-dev/pollux/pkg/state"
)

// eventSpan starts the span of publishing event p of job j on subject: a
// child of ctx's span when it is in the job's trace (the poll or the
// delivery that caused it), else of the job's trace context. Only with
// tracing on (o.tracer != nil).
func (o *Owner) eventSpan(ctx context.Context, j *state.Job, p state.OutboxEvent, subject string) (context.Context, trace.Span) {
	return o.tracer.Start(ctx, j.Trace, "event "+p.Type, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
		attribute.String("messaging.system", "nats"),
		attribute.String("messaging.operation.type", "send"),
		attribute.String("messaging.destination.name", subject),
		attribute.String("pollux.route", j.Route),
		attribute.String("pollux.job.id", j.ID),
		attribute.String("pollux.event.type", p.Type),
		attribute.Int64("pollux.event.seq", int64(p.Seq)),
		attribute.String("pollux.state", string(p.State)),
		attribute.Bool("pollux.terminal", p.State.Terminal()),
	))
}

// traceJob gives job j, about to be created, its trace context: the span
// its creation runs in (ingest's intake span), parent of every later span
// about it; and names the job on that span. A job that has one keeps it.
func (o *Owner) traceJob(ctx context.Context, j *state.Job) {
	if j.Trace == "" {
		j.Trace = tracing.Traceparent(ctx)
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("pollux.job.id", j.ID))
}
