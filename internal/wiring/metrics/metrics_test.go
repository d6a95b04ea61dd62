package metrics_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/pollux-dev/pollux/internal/edge/census"
	"github.com/pollux-dev/pollux/internal/wiring/metrics"
)

// known returns every metric name Pollux exports, with the _bucket, _sum
// and _count series of its histograms.
func known(t *testing.T) map[string]bool {
	t.Helper()
	var cs []prometheus.Collector
	cs = append(cs, metrics.New().Collectors()...)
	cs = append(cs, census.NewCollector(nil, time.Hour, zerolog.Nop()))
	fq := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	names := map[string]bool{}
	for _, c := range cs {
		ch := make(chan *prometheus.Desc, 64)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			m := fq.FindStringSubmatch(d.String())
			require.NotNil(t, m, d.String())
			for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
				names[m[1]+suffix] = true
			}
		}
	}
	return names
}

var metricRe = regexp.MustCompile(`pollux_[a-z_]+`)

func TestDashboardAndAlertsUseRealMetrics(t *testing.T) {
	t.Parallel()
	names := known(t)

	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	b, err := os.ReadFile("../../../deploy/grafana/pollux.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &dash))
	require.NotEmpty(t, dash.Panels)
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			for _, m := range metricRe.FindAllString(tg.Expr, -1) {
				require.True(t, names[m], "panel %q uses %s, which Pollux does not export", p.Title, m)
			}
		}
	}

	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert, Expr string
			}
		}
	}
	b, err = os.ReadFile("../../../deploy/prometheus/alerts.yaml")
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &rules))
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			for _, m := range metricRe.FindAllString(r.Expr, -1) {
				require.True(t, names[m], "alert %s uses %s, which Pollux does not export", r.Alert, m)
			}
		}
	}
	require.GreaterOrEqual(t, n, 5)
}

// TestAlertRulesPassPromtool runs Debian's promtool (the prometheus
// package; .ci/run installs it).
func TestAlertRulesPassPromtool(t *testing.T) {
	t.Parallel()
	promtool := requirePromtool(t)
	out, err := exec.Command(promtool, "check", "rules", "../../../deploy/prometheus/alerts.yaml").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "SUCCESS")
}

func requirePromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("POLLUX_SKIP_PROMTOOL") != "" {
			t.Skip("promtool not installed and POLLUX_SKIP_PROMTOOL set")
		}
		t.Fatal("promtool not found: install Debian's prometheus package (apt-get install prometheus), " +
			"or set POLLUX_SKIP_PROMTOOL=1 to skip")
	}
	return strings.TrimSpace(p)
}

// Each service counts the orphans it swept under its own stream.
func TestOrphansCountedByStream(t *testing.T) {
	m := metrics.New()
	m.Ingest().Orphans(2)
	m.Poller().Orphans(3)
	m.Poller().Orphans(1)
	m.Webhook().Orphans(5)
	mfs, err := m.Registry().Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "pollux_orphans_removed_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			got[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
		}
	}
	require.Equal(t, map[string]float64{"intake": 2, "checks": 4, "webhooks": 5}, got)
}

func TestFrontDoorRequestsAreCounted(t *testing.T) {
	m := metrics.New()
	fd := m.FrontDoor()
	fd.Request("/v1/jobs/{id}", "GET", 404, 3*time.Millisecond)
	fd.Request("/v1/jobs/{id}", "GET", 404, time.Millisecond)
	fd.Request("/replicate/sim/", "POST", 201, time.Second)
	mfs, err := m.Registry().Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	var observed uint64
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			labels := ""
			for _, l := range s.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + " "
			}
			switch mf.GetName() {
			case "pollux_http_requests_total":
				got[labels] = s.GetCounter().GetValue()
			case "pollux_http_request_duration_seconds":
				observed += s.GetHistogram().GetSampleCount()
			}
		}
	}
	require.Equal(t, map[string]float64{
		"code=404 handler=/v1/jobs/{id} method=GET ":    2,
		"code=201 handler=/replicate/sim/ method=POST ": 1,
	}, got)
	require.Equal(t, uint64(3), observed)
}

// What the front door does through a NATS outage is counted: the faces'
// reads it answered from what it knew or could not, and each create
// answered 503 in doubt by how it was settled.
func TestFrontDoorOutagesAreCounted(t *testing.T) {
	m := metrics.New()
	fd := m.FrontDoor()
	fd.OutageRead(true)
	fd.OutageRead(true)
	fd.OutageRead(false)
	fd.Unconfirmed("sim", "withdrawn")
	mfs, err := m.Registry().Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range s.GetLabel() {
				name += " " + l.GetName() + "=" + l.GetValue()
			}
			if strings.Contains(name, "outage") || strings.Contains(name, "unconfirmed") {
				got[name] = s.GetCounter().GetValue()
			}
		}
	}
	require.Equal(t, map[string]float64{
		"pollux_face_outage_reads_total known=true":                         2,
		"pollux_face_outage_reads_total known=false":                        1,
		"pollux_http_creates_unconfirmed_total outcome=withdrawn route=sim": 1,
	}, got)
}

// What ended jobs cost, by app, route and model; each budget against its
// period's fleet-wide total, read at the scrape.
func TestSpendExported(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	m.Spent("studio", "sim", "m", 0.5)
	m.Spent("studio", "sim", "m", 0.25)
	m.Spent("studio", "sim", "m", 0) // a job that cost nothing: no series of its own
	m.SpendBudget("studio", 20, 0, func() (float64, float64, error) { return 17, 40, nil })
	m.SpendLimit("route sim", 0, 300, func() (float64, float64, error) { return 5, 250, nil })
	mfs, err := m.Registry().Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range s.GetLabel() {
				key += "," + l.GetValue()
			}
			got[key] = s.GetCounter().GetValue() + s.GetGauge().GetValue()
		}
	}
	require.InDelta(t, 0.75, got["pollux_spend_total,studio,m,sim"], 1e-9)
	require.InDelta(t, 20, got["pollux_spend_budget,studio,day"], 1e-9)
	require.InDelta(t, 17, got["pollux_spend_period,studio,day"], 1e-9)
	_, monthly := got["pollux_spend_budget,studio,month"]
	require.False(t, monthly, "no month budget, no month series")
	require.InDelta(t, 300, got["pollux_spend_limit_budget,route sim,month"], 1e-9)
	require.InDelta(t, 250, got["pollux_spend_limit_period,route sim,month"], 1e-9)
}
