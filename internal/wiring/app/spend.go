package app

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/core/spend"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/wiring/metrics"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/state"
)

// newKeeper is the process's spend keeper (package spend): the routes'
// prices and the apps' budgets of cfg, over bucket kv, its costs and
// budgets exported by m; its admissions take the apps' waiting slots
// (apps). A bad price or budget refuses the start.
func newKeeper(cfg *config.Config, routes map[string]*route.Route, m *metrics.Metrics, kv jetstream.KeyValue, apps *budget.Apps) (*spend.Keeper, error) {
	prices, budgets, err := spend.FromConfig(cfg)
	if err != nil {
		return nil, err
	}
	lengths := map[string]func(json.RawMessage) float64{}
	for name, r := range routes {
		lengths[name] = r.Length
	}
	limits, err := spend.RouteLimits(cfg)
	if err != nil {
		return nil, err
	}
	k := spend.New(spend.Config{Prices: prices, Budgets: budgets, Limits: limits, Lengths: lengths, Spent: m.Spent, Apps: apps}, kv)
	seen := map[string]bool{}
	for _, ls := range limits {
		for _, lm := range ls {
			if seen[lm.Of] {
				continue // an account's, for each of its routes
			}
			seen[lm.Of] = true
			m.SpendLimit(lm.Of, lm.Budget.Day, lm.Budget.Month, func() (float64, float64, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				return k.Ledger().SpentOf(ctx, lm.Of, time.Now())
			})
		}
	}
	for app, b := range budgets {
		m.SpendBudget(app, b.Day, b.Month, func() (float64, float64, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			return k.Ledger().Spent(ctx, app, time.Now())
		})
	}
	return k, nil
}

// settleSpend counts ended job j's cost in its app's spend (the owner's
// Terminal hook), bounded: a failure leaves its estimate counted.
func settleSpend(ctx context.Context, k *spend.Keeper, j *state.Job, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := k.Settle(ctx, j); err != nil {
		log.Warn().Err(err).Str(logkey.JobID, j.ID).Str(logkey.App, j.App).Msg("counting the job's cost failed: its estimate stays counted")
	}
}

// appCaps are the apps' caps on their jobs of cfg (max_running,
// max_waiting), checked at start (config.App).
func appCaps(cfg *config.Config) map[string]budget.AppCap {
	caps := map[string]budget.AppCap{}
	for _, name := range cfg.AppNames() {
		a := cfg.Apps[name]
		caps[name] = budget.AppCap{Running: a.MaxRunning, Waiting: a.MaxWaiting}
	}
	return caps
}

// endWaiting frees ended job j's waiting slot of its app (the owner's
// Terminal hook), bounded: a failure leaves it to the repair.
func endWaiting(ctx context.Context, apps *budget.Apps, j *state.Job, log zerolog.Logger) {
	if apps == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := apps.Ended(ctx, j); err != nil {
		log.Warn().Err(err).Str(logkey.JobID, j.ID).Str(logkey.App, j.App).Msg("freeing the job's waiting slot failed: the repair frees it")
	}
}
