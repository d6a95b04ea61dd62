package ingest

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Spans of ingest (see package tracing): one for each intake message
// handled, a child of the submitter's span when the message's headers
// carry its traceparent; each provider call it makes is the gate's span,
// a child of it (route.Gate.Call). The job's record takes the intake
// span's context as the job's trace when the owner creates it
// (jobs.Intake.Accept). With tracing off each helper returns after one
// nil check.

// intakeSpan starts the span of handling msg, an intake message of kind
// on route (a route or a model route).
func (s *Service) intakeSpan(ctx context.Context, msg jetstream.Msg, kind, route string, in intake) (context.Context, trace.Span) {
	t := s.jobs.Tracer()
	if t == nil {
		return ctx, nil
	}
	ctx = t.Extract(ctx, msg.Headers())
	return t.Start(ctx, "", "intake "+kind, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("messaging.system", "nats"),
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.destination.name", msg.Subject()),
		attribute.Int64("pollux.intake.seq", int64(in.seq)),
		attribute.Int64("pollux.delivery", int64(in.attempt)),
		attribute.String("pollux.route", route),
	))
}

// endIntake ends an intake span with what became of the message.
func endIntake(span trace.Span, result string) {
	if span == nil {
		return
	}
	span.SetAttributes(attribute.String("pollux.outcome", result))
	span.End()
}
