package generic_test

import (
	"encoding/json"
	"net/url"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/generic"
	"github.com/pollux-dev/pollux/pkg/provider/providertest"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return b
}

func ok(t testing.TB, name string) providertest.Reply {
	return providertest.Reply{Status: 200, Body: fixture(t, name)}
}

// example is an example route fragment: the part of a Pollux route the
// adapter reads.
type example struct {
	Kind             string         `yaml:"kind"`
	TokenEnv         string         `yaml:"token_env"`
	WebhookSecretEnv string         `yaml:"webhook_secret_env"`
	Options          map[string]any `yaml:"options"`
}

// loadExample reads examples/<name>.yaml strictly and returns its options as
// the JSON Pollux's config hands to adapters.
func loadExample(t testing.TB, name string) json.RawMessage {
	t.Helper()
	f, err := os.Open("examples/" + name + ".yaml")
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	var ex example
	require.NoError(t, dec.Decode(&ex))
	require.Equal(t, generic.Kind, ex.Kind)
	require.NotEmpty(t, ex.TokenEnv, "the example names where its token comes from")
	opts, err := json.Marshal(ex.Options)
	require.NoError(t, err)
	return opts
}

// exampleAdapter builds the example's adapter pointed at the fake: the
// example's base_url with the fake's scheme and host, its path kept.
func exampleAdapter(t *testing.T, name string, f *providertest.Server, token string) *generic.Adapter {
	t.Helper()
	opts := loadExample(t, name)
	var o struct {
		BaseURL string `json:"base_url"`
	}
	require.NoError(t, json.Unmarshal(opts, &o))
	base, err := url.Parse(o.BaseURL)
	require.NoError(t, err)
	a, err := generic.NewAdapter(provider.Config{Route: name, Kind: generic.Kind, BaseURL: f.URL + base.Path, Token: token, Options: opts})
	require.NoError(t, err)
	return a
}
