package route_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/pollux-dev/pollux/internal/config"
	"github.com/pollux-dev/pollux/internal/route"
)

func TestBuildTheShippedExample(t *testing.T) {
	t.Setenv("REPLICATE_API_TOKEN", "r8_example")
	t.Setenv("SIM_TOKEN", "dev")
	c, err := config.Load("../../deploy/pollux.yaml")
	require.NoError(t, err)
	routes, err := route.Build(c, route.Registry, nil, 1, zerolog.Nop())
	require.NoError(t, err)
	r := routes["replicate"]
	require.NotNil(t, r.Webhooks)
	require.Equal(t, time.Hour, r.Deadline)
	require.Equal(t, 16, r.StatusWorkers)
	require.Equal(t, 60*time.Second, r.Policy.MaxDelay)
	require.Equal(t, "https://hooks.example.com/webhooks/replicate?job=job-1", r.JobWebhookURL("job-1"))
	require.Empty(t, routes["sim"].JobWebhookURL("job-1"), "no webhook URL, no webhook")
}

func TestBuildNamesTheMissingSecret(t *testing.T) {
	c, err := config.Load("../../deploy/pollux.yaml")
	require.NoError(t, err)
	t.Setenv("SIM_TOKEN", "dev")
	_, err = route.Build(c, route.Registry, nil, 1, zerolog.Nop())
	require.ErrorContains(t, err, "REPLICATE_API_TOKEN is not set")
}

func TestBuildRejectsAnUnknownKind(t *testing.T) {
	c := &config.Config{Routes: map[string]config.Route{"r": {Kind: "carrier-pigeon"}}}
	_, err := route.Build(c, route.Registry, nil, 1, zerolog.Nop())
	require.ErrorContains(t, err, `unknown provider kind "carrier-pigeon"`)
}

// TestBuildTheGenericExamples builds every shipped provider example as a
// route, as an operator pasting it under routes: would.
func TestBuildTheGenericExamples(t *testing.T) {
	paths, err := filepath.Glob("../../pkg/provider/generic/examples/*.yaml")
	require.NoError(t, err)
	require.Len(t, paths, 5)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		var r config.Route
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		require.NoError(t, dec.Decode(&r), p)
		t.Setenv(r.TokenEnv, "example-token:example-secret")
		name := strings.TrimSuffix(filepath.Base(p), ".yaml")
		c := &config.Config{Routes: map[string]config.Route{name: r}}
		require.NoError(t, c.Validate(), p)
		routes, err := route.Build(c, route.Registry, nil, 1, zerolog.Nop())
		require.NoError(t, err, p)
		require.Equal(t, "generic", routes[name].Adapter.Info().Kind, p)
	}
}
