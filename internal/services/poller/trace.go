package poller

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/tracing"
	"github.com/pollux-dev/pollux/pkg/provider"
)

// Each poll — one status call (its own span, "provider status", is the
// gate's) and what follows from it — is a span in its
// job's trace (see package tracing): a child of the trace context the
// check's poll state carries, so a poll an hour after the submission, in
// another process, lands in the submitter's trace. A job whose check has
// none (created while tracing was off) gets a root span for each poll.
// The events a poll publishes are its children. With tracing off, both
// helpers return after one nil check: a quiet poll allocates nothing more.

// pollSpan starts the span of a poll of d's job on r.
func (s *Service) pollSpan(ctx context.Context, r *route.Route, d *jobs.Delivery) (context.Context, trace.Span) {
	t := s.jobs.Tracer()
	if t == nil {
		return ctx, nil
	}
	return t.Start(ctx, d.Live.Trace, "poll", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("pollux.route", r.Name),
		attribute.String("pollux.provider", r.Adapter.Info().Kind),
		attribute.String("pollux.job.id", d.JobID),
		attribute.String("pollux.remote_id", d.Live.RemoteID),
		attribute.String("pollux.model", d.Live.Model),
		attribute.Int("pollux.poll", d.Live.Polls+1),
		attribute.Int64("pollux.delivery", int64(d.N)),
	))
}

// heldPoll ends the span of a poll the route's gate held back: no call
// was made, so it is not a poll ("poll held").
func heldPoll(span trace.Span, held *route.HeldError) {
	if span == nil {
		return
	}
	span.SetName("poll held")
	span.SetAttributes(attribute.String("pollux.held", string(held.Why)))
	span.End()
}

// endPoll ends a poll's span with what the poll learned and decided.
func endPoll(span trace.Span, f *jobs.Fold, dec *jobs.Decision, res *jobs.Polled, now time.Time) {
	if span == nil {
		return
	}
	span.SetAttributes(
		attribute.String("pollux.state", string(f.After.State)),
		attribute.Bool("pollux.changed", f.Changed),
		attribute.Bool("pollux.quiet", f.Quiet),
	)
	switch {
	case res != nil && res.Finished:
		span.SetAttributes(attribute.Bool("pollux.finished", true))
	case dec.End == nil && !dec.Due.IsZero():
		span.SetAttributes(attribute.Float64("pollux.next_poll_in_s", dec.Due.Sub(now).Seconds()))
	}
	if f.Err != nil {
		span.SetAttributes(attribute.String("error.type", provider.ClassOf(f.Err).String()))
	}
	tracing.End(span, f.Err)
}
