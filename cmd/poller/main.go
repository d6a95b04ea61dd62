// Command poller polls providers for the jobs Pollux tracks, each when its
// check message comes due. Start as many as the load needs: they share one
// durable consumer per route.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/alecthomas/kong"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/platform/version"
	"github.com/pollux-dev/pollux/internal/services/poller"
	"github.com/pollux-dev/pollux/internal/wiring/app"
)

func main() {
	var cli struct {
		app.Flags `embed:""`
		// CensusEvery is how often the fleet census behind the fleet-wide
		// gauges (pollux_jobs_tracked, pollux_unresolved_oldest_seconds, …)
		// is taken.
		CensusEvery time.Duration `name:"census-every" env:"POLLUX_CENSUS_EVERY" default:"15s" help:"How often to take the fleet census behind the fleet-wide gauges."`
		// The one flag without an environment twin: a variable left set in a
		// deployment would make every start print the version and exit.
		Version kong.VersionFlag `name:"version" help:"Print the version and exit."`
	}
	kong.Parse(&cli, kong.Name("poller"), kong.Description("Pollux poller: tracks jobs to their terminal state."),
		kong.Vars{"version": version.String("poller"), "metrics_addr": ":9102"})
	os.Exit(app.Run(cli.Flags, "poller", os.Stderr, func(ctx context.Context, env *app.Env) error {
		if cli.CensusEvery <= 0 {
			return fmt.Errorf("--census-every: must be greater than 0 (got %v)", cli.CensusEvery)
		}
		svc, err := poller.New(poller.Config{
			Routes: env.Routes, Options: env.Options(), Logger: env.Log, Metrics: env.Metrics.Poller(), Learned: env.Stats, ModelRoutes: env.ModelRoutes,
			Queue: env.Stats.ObserveQueue, QueueRate: env.Stats.QueueRate, Sweep: env.Config.Streams.SweepInterval,
		}, env.JS, env.NS, env.Res, env.Jobs.Polls(), env.Gates)
		if err != nil {
			return err
		}
		g, ctx := errgroup.WithContext(ctx)
		g.Go(func() error { return env.RunCensus(ctx, cli.CensusEvery) })
		g.Go(func() error { return svc.Run(ctx) })
		return g.Wait()
	}))
}
