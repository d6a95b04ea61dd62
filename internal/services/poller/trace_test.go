package poller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/platform/tracing"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// tracedPoll is a poller whose owner traces with tr, a route, and a
// delivery of a job whose trace context is job.
func tracedPoll(t testing.TB, tr *tracing.Tracer, job string) (*Service, *route.Route, *jobs.Delivery) {
	rt, err := route.New("r", idle{}, config.Route{}, 1)
	require.NoError(t, err)
	s := &Service{jobs: jobs.New(events.Default, nil, &events.Resources{}, jobs.Config{Tracer: tr}).Polls()}
	live := &events.PollState{RemoteID: "x", Model: "m", State: state.Running, Polls: 3, Trace: job}
	return s, rt, &jobs.Delivery{Route: "r", JobID: "job-1", N: 3, Live: live}
}

const jobTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// With tracing off a poll's span costs a nil check: nothing allocated.
func TestPollSpanOffAllocatesNothing(t *testing.T) {
	s, rt, d := tracedPoll(t, nil, jobTrace)
	ctx := context.Background()
	now := time.Now()
	f := jobs.Fold{After: *d.Live, Quiet: true}
	dec := jobs.Decision{Due: now.Add(time.Second)}
	res := jobs.Polled{}
	allocs := testing.AllocsPerRun(1000, func() {
		_, span := s.pollSpan(ctx, rt, d)
		endPoll(span, &f, &dec, &res, now)
	})
	require.Zero(t, allocs)
}

// A poll's span is a child of the job's trace context, named by its job,
// and says what the poll learned.
func TestPollSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	s, rt, d := tracedPoll(t, tracing.New(tp), jobTrace)
	now := time.Now()
	_, span := s.pollSpan(context.Background(), rt, d)
	f := jobs.Fold{After: *d.Live, Quiet: true}
	endPoll(span, &f, &jobs.Decision{Due: now.Add(2 * time.Second)}, &jobs.Polled{}, now)
	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	p := spans[0]
	require.Equal(t, "poll", p.Name)
	require.Equal(t, tracing.Parse(jobTrace).TraceID(), p.SpanContext.TraceID())
	require.Equal(t, tracing.Parse(jobTrace).SpanID(), p.Parent.SpanID())
	got := map[string]any{}
	for _, kv := range p.Attributes {
		got[string(kv.Key)] = kv.Value.AsInterface()
	}
	require.Equal(t, "job-1", got["pollux.job.id"])
	require.Equal(t, int64(4), got["pollux.poll"])
	require.Equal(t, "running", got["pollux.state"])
	require.Equal(t, 2.0, got["pollux.next_poll_in_s"])
}

// BenchmarkPollSpan is what a poll's span costs the poller, with tracing
// off (a nil check) and on (an SDK batching every span, sampled, to an
// exporter that drops them).
func BenchmarkPollSpan(b *testing.B) {
	now := time.Now()
	for _, on := range []bool{false, true} {
		name := "off"
		var tr *tracing.Tracer
		if on {
			name = "on"
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			defer func() { _ = tp.Shutdown(context.Background()) }()
			tr = tracing.New(tp)
		}
		b.Run(name, func(b *testing.B) {
			s, rt, d := tracedPoll(b, tr, jobTrace)
			f := jobs.Fold{After: *d.Live, Quiet: true}
			dec := jobs.Decision{Due: now.Add(time.Second)}
			res := jobs.Polled{}
			b.ReportAllocs()
			for b.Loop() {
				_, span := s.pollSpan(context.Background(), rt, d)
				endPoll(span, &f, &dec, &res, now)
			}
		})
	}
}
