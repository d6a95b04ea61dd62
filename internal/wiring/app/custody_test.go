package app_test

import (
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/wiring/app"
	"github.com/pollux-dev/pollux/internal/wiring/metrics"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/replicate"
	"github.com/pollux-dev/pollux/pkg/provider/veo"
)

// Output custody's configuration comes from the routes that keep their
// outputs (which the front door's faces are told too) and the custody
// section; an adapter that opens its outputs
// itself (Veo: the API key) is handed over as the route's opener.
func TestCustodyConfig(t *testing.T) {
	t.Parallel()
	keep := &config.KeepOutputs{MaxBytes: 1 << 20}
	cfg := &config.Config{Custody: &config.Custody{ExpiringLead: 30 * time.Minute},
		Routes: map[string]config.Route{"veo": {Kind: veo.Kind, KeepOutputs: keep}, "rep": {Kind: replicate.Kind}}}
	routes := map[string]*route.Route{}
	for name, a := range map[string]func(provider.Config) (provider.Adapter, error){"veo": veo.New, "rep": replicate.New} {
		ad, err := a(provider.Config{Route: name, Kind: cfg.Routes[name].Kind, BaseURL: "http://127.0.0.1:1", Token: "t"})
		require.NoError(t, err)
		routes[name], err = route.New(name, ad, cfg.Routes[name], 1)
		require.NoError(t, err)
	}
	e := &app.Env{Config: cfg, Routes: routes, Metrics: metrics.New(), Log: zerolog.Nop()}
	c := app.Custody(e)
	require.Equal(t, map[string]config.KeepOutputs{"veo": *keep}, c.Routes)
	require.Equal(t, []string{"veo"}, e.KeepOutputs(), "the routes whose outputs the faces link to Pollux's copies")
	require.Contains(t, c.Openers, "veo")
	require.NotContains(t, c.Openers, "rep", "Replicate's outputs need no key: a plain GET")
	require.Equal(t, 30*time.Minute, c.ExpiringLead)
	require.NotNil(t, c.Metrics.Expiring)
	require.True(t, cfg.CustodyEnabled())
}
