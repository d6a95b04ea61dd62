package census

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/route"
)

// Collector exports the latest snapshot as Prometheus gauges. Run refreshes
// it; a scrape never touches NATS.
type Collector struct {
	take  func(context.Context) (*Snapshot, error)
	every time.Duration
	log   zerolog.Logger

	mu   sync.RWMutex
	last *Snapshot
}

// NewCollector returns a collector refreshed every interval by take.
func NewCollector(take func(context.Context) (*Snapshot, error), every time.Duration, log zerolog.Logger) *Collector {
	return &Collector{take: take, every: every, log: log}
}

// Run refreshes the snapshot until ctx ends.
func (c *Collector) Run(ctx context.Context) error {
	t := time.NewTicker(c.every)
	defer t.Stop()
	for {
		tctx, cancel := context.WithTimeout(ctx, c.every)
		s, err := c.take(tctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			c.log.Warn().Err(err).Msg("fleet census failed")
		} else {
			c.mu.Lock()
			c.last = s
			c.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

var (
	descTracked  = prometheus.NewDesc("pollux_jobs_tracked", "Jobs being tracked (one check message each), by route.", []string{"route"}, nil)
	descParked   = prometheus.NewDesc("pollux_jobs_parked", "Tracked jobs whose check is parked (next poll park_after or more away), by route; above ~64k estimated from one check slot.", []string{"route"}, nil)
	descBacklog  = prometheus.NewDesc("pollux_checks_backlog", "Checks no poller has picked up yet, by route.", []string{"route"}, nil)
	descOldest   = prometheus.NewDesc("pollux_unresolved_oldest_seconds", "How long the route's oldest unresolved job has been at its provider (since its submit; 0: none), by route.", []string{"route"}, nil)
	descIntake   = prometheus.NewDesc("pollux_intake_backlog", "Intake messages not yet handled, by route.", []string{"route"}, nil)
	descLeases   = prometheus.NewDesc("pollux_budget_leases_out", "Budget leases out (in a call or resting), by route and kind.", []string{"route", "kind"}, nil)
	descCap      = prometheus.NewDesc("pollux_budget_leases_cap", "Budget cap, by route and kind.", []string{"route", "kind"}, nil)
	descPaused   = prometheus.NewDesc("pollux_route_paused", "1 while a route is paused, by route and kind (rate_limit, auth, operator).", []string{"route", "kind"}, nil)
	descPauseFor = prometheus.NewDesc("pollux_route_pause_remaining_seconds", "Time left in a route's pause.", []string{"route"}, nil)
	descLevelOut = prometheus.NewDesc("pollux_level_leases_out", "Budget leases out at a shared level (an account, global), by level and kind.", []string{"level", "kind"}, nil)
	descLevelCap = prometheus.NewDesc("pollux_level_leases_cap", "Budget cap at a shared level, by level and kind.", []string{"level", "kind"}, nil)
	descRunning  = prometheus.NewDesc("pollux_running_slots", "Running slots taken (jobs created at the provider and not yet ended), by budget level.", []string{"level"}, nil)
	descRunCap   = prometheus.NewDesc("pollux_running_cap", "Running cap in force (learned, for a level that learns it), by budget level.", []string{"level"}, nil)
	descRate     = prometheus.NewDesc("pollux_learned_rate", "Call rate a level learned from the provider's refusals and calls at now, fleet-wide (calls a second), by level and kind; absent while the configured rate (or none) is in force.", []string{"level", "kind"}, nil)
	descRateConf = prometheus.NewDesc("pollux_learned_rate_configured", "Configured rate of a level whose learned rate is in force (0: none configured), by level and kind.", []string{"level", "kind"}, nil)
	descRateLow  = prometheus.NewDesc("pollux_learned_rate_decreases", "How often the provider's refusals lowered a learned rate since it was first learned, by level and kind.", []string{"level", "kind"}, nil)
	descRunConf  = prometheus.NewDesc("pollux_running_configured_cap", "Running cap the configuration gives (100000 when a learning level has none), by budget level.", []string{"level"}, nil)
	descWebhooks = prometheus.NewDesc("pollux_webhooks_backlog", "Stored webhook deliveries not yet applied.", nil, nil)
	descEvents   = prometheus.NewDesc("pollux_events_stored", "Events held in the events stream.", nil, nil)
	descAge      = prometheus.NewDesc("pollux_census_age_seconds", "Age of the fleet census these gauges come from.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTracked, descParked, descBacklog, descOldest, descIntake, descLeases, descCap,
		descLevelOut, descLevelCap, descRunning, descRunCap, descRunConf, descRate, descRateConf, descRateLow, descPaused, descPauseFor, descWebhooks, descEvents, descAge} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	s := c.last
	c.mu.RUnlock()
	if s == nil {
		return
	}
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, r := range s.Routes {
		g(descTracked, float64(r.Tracked), r.Route)
		g(descParked, float64(r.Parked), r.Route)
		g(descBacklog, float64(r.Backlog), r.Route)
		g(descOldest, time.Duration(r.Oldest).Seconds(), r.Route)
		g(descIntake, float64(r.Intake), r.Route)
		for kind, l := range r.Leases {
			g(descLeases, float64(l.Out), r.Route, kind)
			g(descCap, float64(l.Cap), r.Route, kind)
		}
		for _, kind := range []string{route.PauseRateLimit, route.PauseAuth, route.PauseOperator} {
			v := 0.0
			if r.Pause != nil && r.Pause.Kind == kind || kind == route.PauseOperator && r.Operator != nil {
				v = 1
			}
			g(descPaused, v, r.Route, kind)
		}
		left := 0.0
		if r.Pause != nil {
			left = max(time.Until(r.Pause.Until).Seconds(), 0)
		}
		g(descPauseFor, left, r.Route)
	}
	for _, l := range s.Levels {
		for kind, ls := range l.Leases {
			g(descLevelOut, float64(ls.Out), l.Level, kind)
			g(descLevelCap, float64(ls.Cap), l.Level, kind)
		}
		if l.Running != nil {
			g(descRunning, float64(l.Running.Out), l.Level)
			g(descRunCap, float64(l.Running.Cap), l.Level)
			if l.Configured > 0 {
				g(descRunConf, float64(l.Configured), l.Level)
			}
		}
	}
	for _, r := range s.Rates {
		g(descRate, r.Rate, r.Level, r.Kind)
		g(descRateConf, r.Configured, r.Level, r.Kind)
		g(descRateLow, float64(r.Lowered), r.Level, r.Kind)
	}
	g(descWebhooks, float64(s.Webhooks))
	g(descEvents, float64(s.Events))
	g(descAge, time.Since(s.At).Seconds())
}
