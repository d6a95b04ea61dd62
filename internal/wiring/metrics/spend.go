package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// spendMetrics are the apps' spend: what ended jobs cost, and each
// budget against what its period counts (fleet-wide, read from the
// ledger at each scrape).
type spendMetrics struct {
	cost    *prometheus.CounterVec
	budgets *budgetGauges
	// limits are the routes' and accounts' budgets, as budgets the apps'.
	limits *budgetGauges
}

func newSpendMetrics() *spendMetrics {
	return &spendMetrics{
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pollux_spend_total",
			Help: "What the jobs this process ended cost (their routes' prices), by app, route and model: sum it across the fleet.",
		}, []string{"app", "route", "model"}),
		budgets: &budgetGauges{
			budget: prometheus.NewDesc("pollux_spend_budget", "An app's spend budget, by app and period (day, month).", []string{"app", "period"}, nil),
			spent: prometheus.NewDesc("pollux_spend_period", "What an app's current period counts against its budget (ended jobs' costs, jobs under way's estimates), fleet-wide, by app and period.",
				[]string{"app", "period"}, nil),
		},
		limits: &budgetGauges{
			budget: prometheus.NewDesc("pollux_spend_limit_budget", "A route's or an account's spend budget (spend_budgets), holding every app's jobs there, by limit (route <name>, account <name>) and period.", []string{"limit", "period"}, nil),
			spent: prometheus.NewDesc("pollux_spend_limit_period", "What a route's or an account's current period counts against its spend budget, fleet-wide, by limit and period.",
				[]string{"limit", "period"}, nil),
		},
	}
}

// Spent counts an ended job's cost (pollux_spend_total).
func (m *Metrics) Spent(app, route, model string, cost float64) {
	if cost > 0 {
		m.spend.cost.WithLabelValues(app, route, model).Add(cost)
	}
}

// SpendBudget exports pollux_spend_budget{app,period} and, at each scrape,
// pollux_spend_period{app,period} from spent (day and month; not exported
// when it fails).
func (m *Metrics) SpendBudget(app string, day, month float64, spent func() (day, month float64, err error)) {
	m.spend.budgets.add(app, day, month, spent)
}

// SpendLimit exports pollux_spend_limit_budget{limit,period} and, at each
// scrape, pollux_spend_limit_period{limit,period} of a route's or an
// account's spend budget (limit: "route x", "account y"), as SpendBudget
// an app's.
func (m *Metrics) SpendLimit(limit string, day, month float64, spent func() (day, month float64, err error)) {
	m.spend.limits.add(limit, day, month, spent)
}

func (g *budgetGauges) add(who string, day, month float64, spent func() (float64, float64, error)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.apps = append(g.apps, appBudget{app: who, day: day, month: month, spent: spent})
}

type appBudget struct {
	app        string
	day, month float64
	spent      func() (float64, float64, error)
}

type budgetGauges struct {
	budget, spent *prometheus.Desc
	mu            sync.Mutex
	apps          []appBudget
}

func (g *budgetGauges) Describe(ch chan<- *prometheus.Desc) { ch <- g.budget; ch <- g.spent }

func (g *budgetGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	apps := g.apps
	g.mu.Unlock()
	for _, a := range apps {
		day, month, err := a.spent()
		for _, p := range []struct {
			name          string
			budget, spent float64
		}{{"day", a.day, day}, {"month", a.month, month}} {
			if p.budget <= 0 {
				continue
			}
			ch <- prometheus.MustNewConstMetric(g.budget, prometheus.GaugeValue, p.budget, a.app, p.name)
			if err == nil {
				ch <- prometheus.MustNewConstMetric(g.spent, prometheus.GaugeValue, p.spent, a.app, p.name)
			}
		}
	}
}
