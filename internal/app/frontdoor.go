package app

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/census"
	"github.com/pollux-dev/pollux/internal/frontdoor"
	"github.com/pollux-dev/pollux/internal/index"
	"github.com/pollux-dev/pollux/pkg/schedule"
)

// Census samples the fleet as this process sees it: its routes and their
// budget levels.
func (e *Env) Census(ctx context.Context) (*census.Snapshot, error) {
	return census.Take(ctx, e.NS, e.Res, e.RouteNames(), e.Levels()...)
}

// FrontDoor builds the HTTP front door of the environment's routes, with
// everything its endpoints read: a jobs index over the events stream (run
// under g until ctx ends, and caught up before FrontDoor returns), the
// route pauses, the census, the learned durations and the routes'
// schedules. cfg gives the rest: tokens, the console, the logger.
func (e *Env) FrontDoor(ctx context.Context, g *errgroup.Group, cfg frontdoor.Config) (*frontdoor.Server, error) {
	x, err := index.New(index.Config{Logger: cfg.Logger}, e.JS, e.NS, e.Res)
	if err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	g.Go(func() error { return x.Run(ctx, ready) })
	select {
	case <-ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("loading the jobs index: %w", ctx.Err())
	}
	policies := make(map[string]schedule.Policy, len(e.Routes))
	for name, r := range e.Routes {
		policies[name] = r.Policy
		if r.WebhookURL != "" {
			cfg.WebhookRoutes = append(cfg.WebhookRoutes, name)
		}
	}
	cfg.Routes, cfg.Index, cfg.Pauses, cfg.Census = e.RouteNames(), x, e.Pauses, e.Census
	for name := range e.ModelRoutes {
		cfg.ModelRoutes = append(cfg.ModelRoutes, name)
	}
	cfg.Policies = policies
	cfg.Learned = func(route, model, configKey string) (total, run *schedule.Dist) {
		return e.Stats.Lookup(route, model, configKey, 0) // the model's own, not a length's
	}
	return frontdoor.New(cfg, e.JS, e.NS, e.Res, e.Jobs)
}
