package ingest

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/tracing"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Spans of ingest (see package tracing): one for each intake message
// handled, a child of the submitter's span when the message's headers
// carry its traceparent, and one for each provider call. The job's
// record takes the intake span's context as the job's trace when the
// owner creates it (jobs.Intake.Accept). With tracing off each helper
// returns after one nil check.

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

// callSpan starts the span of a provider call (op: submit, find, cancel)
// about job j, in the job's trace; with j nil, in ctx's span only (none
// without one: a stray root says nothing).
func (s *Service) callSpan(ctx context.Context, r *route.Route, op string, j *state.Job) (context.Context, trace.Span) {
	t := s.jobs.Tracer()
	if t == nil || (j == nil && !trace.SpanContextFromContext(ctx).IsValid()) {
		return ctx, nil
	}
	var job string
	attrs := []attribute.KeyValue{attribute.String("pollux.route", r.Name), attribute.String("pollux.provider", r.Adapter.Info().Kind)}
	if j != nil {
		job = j.Trace
		attrs = append(attrs, attribute.String("pollux.job.id", j.ID), attribute.String("pollux.model", j.Model),
			attribute.Int("pollux.submit.attempt", j.SubmitAttempts))
	}
	return t.Start(ctx, job, "provider "+op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endCall ends a provider call's span with its answer.
func endCall(span trace.Span, st provider.Status, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetAttributes(attribute.String("error.type", provider.ClassOf(err).String()))
	} else {
		if st.RemoteID != "" {
			span.SetAttributes(attribute.String("pollux.remote_id", st.RemoteID))
		}
		if st.State != "" {
			span.SetAttributes(attribute.String("pollux.state", string(st.State)))
		}
	}
	tracing.End(span, err)
}
