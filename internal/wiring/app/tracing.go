package app

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/tracing"
)

// An Option configures Open.
type Option func(*options)

type options struct {
	tracer *tracing.Tracer
	calls  func(route string, op route.Op, class string, d time.Duration)
}

// WithCalls hands fn every provider call the environment's gates observe,
// besides its metrics (route.GateConfig.Observe): a measurement counts
// them. fn must not block; nil hands them to no one.
func WithCalls(fn func(route string, op route.Op, class string, d time.Duration)) Option {
	return func(o *options) { o.calls = fn }
}

// WithTracer traces the lives of the jobs the environment touches with t
// (nil, the default: tracing off). The jobs' owner holds it, and every
// service built on the environment starts its spans with it (see package
// tracing).
func WithTracer(t *tracing.Tracer) Option {
	return func(o *options) { o.tracer = t }
}

func openOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// startTracing sets up a service binary's tracing from its --otlp-endpoint
// and the standard OTEL_* environment; service.name is "pollux-<component>"
// unless OTEL_SERVICE_NAME says otherwise. The returned stop flushes the
// spans not yet exported, bounded in time.
func startTracing(ctx context.Context, endpoint, component string, log zerolog.Logger) (*tracing.Tracer, func(), error) {
	t, shutdown, err := tracing.Setup(ctx, tracing.Config{Endpoint: endpoint, Service: "pollux-" + component, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	if t != nil {
		log.Info().Msg("tracing: exporting spans over OTLP/HTTP")
	}
	return t, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.Warn().Err(err).Msg("tracing: flushing the last spans failed")
		}
	}, nil
}
