package webhook

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/pollux-dev/pollux/internal/core/jobs"
)

// A delivery has two spans (see package tracing). Its receipt, "webhook
// receive", is a trace of its own: the provider's request carries no
// context of the job's (and one it carries is the provider's, not the
// submitter's), and the receiver reads no record. Its context goes with
// the stored delivery as its traceparent header; a trace context the
// provider sent is never stored, with tracing on or off (storedHeaders),
// so an applier links only to a receipt of Pollux's. Its application,
// "webhook apply", is in the job's trace,
// linked to the receipt; it is started once the owner has read the job
// (with the time the application began), so it costs no extra read. With
// tracing off both helpers return after one nil check.

// receiveSpan starts the span of a delivery's receipt on route name.
func (s *Service) receiveSpan(req *http.Request, name string) (*http.Request, trace.Span) {
	t := s.jobs.Tracer()
	if t == nil {
		return req, nil
	}
	ctx, span := t.Start(req.Context(), "", "webhook receive", trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("http.request.method", req.Method),
			attribute.String("http.route", "/webhooks/{route}"),
			attribute.String("pollux.route", name),
		))
	if job := req.URL.Query().Get("job"); job != "" {
		span.SetAttributes(attribute.String("pollux.job.id", job))
	}
	return req.WithContext(ctx), span
}

// endReceive ends a receipt's span with the status answered.
func endReceive(span trace.Span, status int) {
	if span == nil {
		return
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if status >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}

// applySpan records the application of a stored delivery to its job, a
// span in the job's trace from began until now, linked to the delivery's
// receipt (its headers' traceparent).
func (s *Service) applySpan(ctx context.Context, h http.Header, name, delivery string, began time.Time, held time.Duration, a jobs.Applied) {
	t := s.jobs.Tracer()
	if t == nil || a.Job == nil {
		return
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(began),
		trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("pollux.route", name),
			attribute.String("pollux.job.id", a.Job.ID),
			attribute.String("pollux.remote_id", a.Job.RemoteID),
			attribute.String("pollux.delivery_id", delivery),
			attribute.String("pollux.state", string(a.Job.State)),
			attribute.Bool("pollux.changed", a.Changed),
			attribute.Float64("pollux.webhook.held_s", held.Seconds()),
		)}
	if rc := t.Remote(h); rc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: rc}))
	}
	_, span := t.Start(ctx, a.Job.Trace, "webhook apply", opts...)
	span.End()
}
