package tracing_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/tracing"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestSetup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, tc := range map[string]struct {
		endpoint string
		env      map[string]string
		on       bool
		err      string
	}{
		"off by default":            {},
		"an endpoint":               {endpoint: "http://127.0.0.1:4318", on: true},
		"the traces endpoint alone": {env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, on: true},
		"the SDK disabled":          {endpoint: "http://127.0.0.1:4318", env: map[string]string{"OTEL_SDK_DISABLED": "true"}},
		"no exporter":               {endpoint: "http://127.0.0.1:4318", env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
		"not a URL":                 {endpoint: "127.0.0.1:4318", err: "--otlp-endpoint"},
		"gRPC":                      {endpoint: "http://127.0.0.1:4317", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: "(http/protobuf) only"},
		"another exporter":          {endpoint: "http://127.0.0.1:4318", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "otlp only"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr, shutdown, err := tracing.Setup(ctx, tracing.Config{Endpoint: tc.endpoint, Service: "pollux-test", Getenv: env(tc.env)})
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.on, tr != nil)
			// Nothing was exported: the shutdown connects to nothing.
			require.NoError(t, shutdown(ctx))
		})
	}
}
