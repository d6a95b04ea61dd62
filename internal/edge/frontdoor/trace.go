package frontdoor

import (
	"context"
	"net/http"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pollux-dev/pollux/internal/platform/tracing"
)

// publishIntake publishes an intake message for request r (endpoint is
// its route pattern, "POST /v1/jobs"). With tracing on (see package
// tracing) it does so in a span of the request — a child of the
// request's traceparent header, so the submitter sees Pollux in its own
// trace — whose context the message carries in its traceparent header:
// ingest's intake span, and so the job's trace, descend from it. With
// tracing off it publishes the message as it is.
func (s *Server) publishIntake(ctx context.Context, r *http.Request, endpoint, subject, route, id string, data []byte) error {
	t := s.jobs.Tracer()
	if t == nil {
		_, err := s.js.Publish(ctx, subject, data)
		return err
	}
	ctx = t.ExtractHTTP(ctx, r.Header)
	ctx, span := t.Start(ctx, "", endpoint, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("http.request.method", r.Method),
		attribute.String("http.route", r.URL.Path),
		attribute.String("messaging.system", "nats"),
		attribute.String("messaging.destination.name", subject),
		attribute.String("pollux.route", route),
		attribute.String("pollux.job.id", id),
	))
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	t.Inject(ctx, msg.Header)
	_, err := s.js.PublishMsg(ctx, msg)
	status := http.StatusAccepted
	if err != nil {
		status = http.StatusServiceUnavailable
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	tracing.End(span, err)
	return err
}
