package frontdoor

import (
	"context"
	"net/http"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pollux-dev/pollux/internal/platform/tracing"
	"github.com/pollux-dev/pollux/pkg/events"
)

// publishIntake publishes an intake message of kind (events.KindSubmit,
// KindTrack) for job id on route for request r (endpoint is its route
// pattern, "POST /v1/jobs"), stored once or not at all (intake.deliver:
// nil, a *notStored, or an *unconfirmed). With tracing on (see package
// tracing) it does so in a span of the request — a child of the
// request's traceparent header, so the submitter sees Pollux in its own
// trace — whose context the message carries in its traceparent header:
// ingest's intake span, and so the job's trace, descend from it. With
// tracing off it publishes the message as it is.
func (s *Server) publishIntake(ctx context.Context, r *http.Request, endpoint, kind, route, id string, data []byte) error {
	subject := s.ns.Intake(kind, route)
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, events.IntakeMsgID(kind, route, id))
	t := s.jobs.Tracer()
	if t == nil {
		return s.intake.deliver(ctx, msg)
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
	t.Inject(ctx, msg.Header)
	err := s.intake.deliver(ctx, msg)
	status := http.StatusAccepted
	if err != nil {
		status = http.StatusServiceUnavailable
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	tracing.End(span, err)
	return err
}
