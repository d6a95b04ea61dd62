package metrics_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/platform/version"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/internal/wiring/app"
	"github.com/pollux-dev/pollux/internal/wiring/metrics"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/replicate"
)

// series is a scrape: each series' name and labels → its value (a
// histogram's count).
type series map[string]float64

func scrape(t *testing.T, m *metrics.Metrics) series {
	t.Helper()
	mfs, err := m.Registry().Gather()
	require.NoError(t, err)
	out := series{}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			// name{a="x",b="y"}, the labels sorted by name as the registry has them
			key := mf.GetName()
			for i, l := range s.GetLabel() {
				key += map[bool]string{true: "{", false: ","}[i == 0] + l.GetName() + `="` + l.GetValue() + `"`
			}
			if len(s.GetLabel()) > 0 {
				key += "}"
			}
			switch {
			case s.GetCounter() != nil:
				out[key] = s.GetCounter().GetValue()
			case s.GetGauge() != nil:
				out[key] = s.GetGauge().GetValue()
			case s.GetHistogram() != nil:
				out[key] = float64(s.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// requireZero asserts that each series is in the scrape, at zero.
func requireZero(t *testing.T, got series, want ...string) {
	t.Helper()
	for _, w := range want {
		v, ok := got[w]
		require.True(t, ok, "%s is exported before its first event", w)
		require.Zero(t, v, w)
	}
}

// The series dashboards and alerts read are there at zero from the start,
// for each configured route, in a process of each service, whichever of the
// routes and the service's hooks come first.
func TestSeriesStartAtZero(t *testing.T) {
	t.Parallel()
	shared := []string{
		`pollux_route_pauses_total{kind="rate_limit",route="replicate"}`,
		`pollux_route_pauses_total{kind="auth",route="fal"}`,
		`pollux_route_paused_seconds_total{kind="rate_limit",route="fal"}`,
		`pollux_reconciliation_catches_total{route="replicate"}`,
		`pollux_reconciliation_catches_total{route="fal"}`,
		`pollux_deadline_overrun_seconds{route="replicate"}`,
		`pollux_jobs_terminal_total{detected_by="webhook",route="replicate",state="succeeded"}`,
		`pollux_jobs_terminal_total{detected_by="pollux",route="fal",state="expired"}`,
		`pollux_detection_delay_seconds{detected_by="poll",route="fal"}`,
		`pollux_polls_per_completion{route="replicate"}`,
		`pollux_finished_job_polls_total{route="fal"}`,
		`pollux_events_published_total{type="succeeded"}`,
		`pollux_events_published_total{type="rejected"}`,
	}
	for _, tc := range []struct {
		service string
		hooks   func(*metrics.Metrics)
		own     []string // the service's own series
		others  []string // metrics only other services feed: absent
	}{
		{"ingest", func(m *metrics.Metrics) { m.Ingest() }, []string{
			`pollux_provider_call_seconds{class="ok",op="submit",route="replicate"}`,
			`pollux_provider_call_seconds{class="rate_limited",op="cancel",route="fal"}`,
			`pollux_orphans_removed_total{stream="intake"}`,
		}, []string{"pollux_status_call_seconds", "pollux_webhooks_dropped_total"}},
		{"poller", func(m *metrics.Metrics) { m.Poller() }, []string{
			`pollux_status_call_seconds{class="ok",route="replicate"}`,
			`pollux_status_call_seconds{class="auth",route="fal"}`,
			`pollux_check_lateness_seconds{route="fal"}`,
			`pollux_unresolved_age_seconds{route="replicate"}`,
			`pollux_orphans_removed_total{stream="checks"}`,
		}, []string{"pollux_provider_call_seconds", "pollux_webhooks_applied_total"}},
		{"webhook", func(m *metrics.Metrics) { m.Webhook() }, []string{
			`pollux_webhooks_applied_total{changed="true",route="fal"}`,
			`pollux_webhooks_dropped_total{reason="unknown_job",route="replicate"}`,
			`pollux_callback_hints_total{route="fal"}`,
			`pollux_orphans_removed_total{stream="webhooks"}`,
		}, []string{"pollux_status_call_seconds", "pollux_provider_call_seconds"}},
	} {
		for _, routesFirst := range []bool{true, false} {
			m := metrics.New()
			if routesFirst {
				m.Routes("replicate", "fal")
				tc.hooks(m)
			} else {
				tc.hooks(m)
				m.Routes("replicate")
				m.Routes("fal", "replicate") // again: no harm
			}
			got := scrape(t, m)
			requireZero(t, got, shared...)
			requireZero(t, got, tc.own...)
			for key := range got {
				for _, other := range tc.others {
					require.NotRegexp(t, "^"+other+"[{]", key, "%s: a series no %s feeds", tc.service, tc.service)
				}
			}
		}
	}
}

// A process's metrics have every configured route's series from the
// moment its environment opens (app.Open hands the routes over).
func TestOpenStartsRouteSeries(t *testing.T) {
	t.Parallel()
	_, nc, _ := natstest.JetStream(t)
	routes := map[string]*route.Route{}
	rcs := map[string]config.Route{}
	for _, name := range []string{"replicate", "fal"} {
		a, err := replicate.New(provider.Config{Route: name, Kind: replicate.Kind, BaseURL: "http://127.0.0.1:1", Token: "t"})
		require.NoError(t, err)
		rcs[name] = config.Route{Kind: replicate.Kind}
		routes[name], err = route.New(name, a, rcs[name], 1)
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	t.Cleanup(func() {
		cancel()
		_ = g.Wait()
	})
	m := metrics.New()
	_, err := app.Open(gctx, g, &config.Config{Routes: rcs}, nc, routes, m, zerolog.Nop())
	require.NoError(t, err)
	requireZero(t, scrape(t, m),
		`pollux_route_pauses_total{kind="rate_limit",route="replicate"}`,
		`pollux_route_pauses_total{kind="auth",route="fal"}`,
		`pollux_reconciliation_catches_total{route="fal"}`,
		`pollux_deadline_overrun_seconds{route="replicate"}`,
		`pollux_jobs_terminal_total{detected_by="poll",route="fal",state="failed"}`,
	)
}

// Every process says which build it runs.
func TestBuildInfo(t *testing.T) {
	t.Parallel()
	bi := version.Get()
	got := scrape(t, metrics.New())
	key := `pollux_build_info{goversion="` + runtime.Version() + `",revision="` + bi.Revision + `",version="` + bi.Version + `"}`
	require.Equal(t, 1.0, got[key], "%s in %v", key, got)
}

// Output custody's series are there at zero from the start: every
// route's outputs_expiring, and the copies' outcomes of those that keep
// their outputs.
func TestCustodySeriesStartAtZero(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	m.Custody([]string{"replicate", "fal"}, map[string]bool{"replicate": true})
	got := scrape(t, m)
	requireZero(t, got,
		`pollux_outputs_expiring_total{kept="true",route="replicate"}`,
		`pollux_outputs_expiring_total{kept="false",route="fal"}`,
		`pollux_custody_outputs_total{outcome="saved",route="replicate"}`,
		`pollux_custody_outputs_total{outcome="failed",route="replicate"}`,
		`pollux_custody_bytes_total{route="replicate"}`,
	)
	_, ok := got[`pollux_custody_outputs_total{outcome="saved",route="fal"}`]
	require.False(t, ok, "fal keeps no outputs")
}
