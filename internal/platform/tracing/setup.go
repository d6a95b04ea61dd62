package tracing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"strings"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/pollux-dev/pollux/internal/platform/version"
)

// Config configures a process's tracing. Zero values mean the defaults on
// each field.
type Config struct {
	// Endpoint is the base URL of the OTLP/HTTP collector spans are
	// exported to (at its /v1/traces), as OTEL_EXPORTER_OTLP_ENDPOINT
	// means it: the binaries' --otlp-endpoint, whose environment twin
	// that variable is. Empty (the default): tracing is off, unless
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT names the traces URL itself.
	Endpoint string
	// Service is the service.name of the spans (default "pollux"), unless
	// OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES)
	// names another.
	Service string
	// Logger receives the exporter's failures (default: none).
	Logger zerolog.Logger
	// Getenv reads the environment (default os.Getenv).
	Getenv func(string) string
}

// Shutdown flushes the spans not yet exported and stops the exporter.
type Shutdown func(context.Context) error

// Setup builds the process's tracing: an OTLP/HTTP exporter behind a
// batching span processor when an endpoint is configured (see Config and
// the package documentation), else nothing: a nil Tracer and a Shutdown
// that does nothing. It connects to nothing: an unreachable collector
// costs the spans, logged, never a start.
func Setup(ctx context.Context, cfg Config) (*Tracer, Shutdown, error) {
	none := func(context.Context) error { return nil }
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	traces := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	switch {
	case cfg.Endpoint == "" && traces == "",
		strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true"),
		strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none"):
		return nil, none, nil
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(v); p != "" && p != "http/protobuf" {
			return nil, none, fmt.Errorf("%s=%s: Pollux exports traces over OTLP/HTTP (http/protobuf) only", v, p)
		}
	}
	if e := getenv("OTEL_TRACES_EXPORTER"); e != "" && e != "otlp" {
		return nil, none, fmt.Errorf("OTEL_TRACES_EXPORTER=%s: Pollux exports traces with otlp only (or none)", e)
	}
	var opts []otlptracehttp.Option
	if traces == "" {
		// The signal's own variable, when set, wins over the base URL, as
		// the SDK has it; else the base URL's /v1/traces.
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, none, fmt.Errorf("--otlp-endpoint %q: want the collector's base URL, http://host:4318 or https://…", cfg.Endpoint)
		}
		u.Path = path.Join("/", u.Path, "v1/traces")
		opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, none, fmt.Errorf("OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(
			attribute.String("service.name", cmp.Or(cfg.Service, "pollux")),
			attribute.String("service.version", version.Get().Version),
		),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES: last, so they win
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, none, fmt.Errorf("tracing resource: %w", err)
	}
	log := cfg.Logger
	// The SDK reports export failures to its global handler only.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn().Err(err).Msg("tracing: exporting spans failed")
	}))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return New(tp), tp.Shutdown, nil
}
