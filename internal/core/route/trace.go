package route

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pollux-dev/pollux/internal/platform/tracing"
	"github.com/pollux-dev/pollux/pkg/provider"
)

// Each provider call a gate makes is a span, "provider <op>" (see package
// tracing): a child of the caller's span when ctx carries one (the intake
// message's, a poll's), else, for a call about a job (Call.Job), a child
// of the job's trace context; a call with neither makes none (a stray
// root says nothing). With tracing off both helpers return after one nil
// check.

// span starts the span of call c, once it is admitted.
func (g *Gate) span(ctx context.Context, c Call) (context.Context, trace.Span) {
	t := g.cfg.Tracer
	if t == nil || (c.Job == nil && !trace.SpanContextFromContext(ctx).IsValid()) {
		return ctx, nil
	}
	r := g.Route
	attrs := []attribute.KeyValue{attribute.String("pollux.route", r.Name), attribute.String("pollux.provider", r.Adapter.Info().Kind)}
	var job string
	if j := c.Job; j != nil {
		job = j.Trace
		attrs = append(attrs, attribute.String("pollux.job.id", j.ID), attribute.String("pollux.model", j.Model),
			attribute.Int("pollux.submit.attempt", j.SubmitAttempts))
	}
	return t.Start(ctx, job, "provider "+string(c.Op), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endSpan ends a call's span with its answer.
func endSpan(span trace.Span, st provider.Status, err error) {
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
