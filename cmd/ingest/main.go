// Command ingest consumes Pollux's intake subjects: it submits jobs to
// providers exactly once, starts tracking jobs submitted elsewhere, cancels
// jobs, and rejects bad requests with an event naming the problem.
package main

import (
	"context"
	"os"

	"github.com/alecthomas/kong"

	"github.com/pollux-dev/pollux/internal/app"
	"github.com/pollux-dev/pollux/internal/ingest"
)

func main() {
	var cli struct {
		app.Flags `embed:""`
	}
	kong.Parse(&cli, kong.Name("ingest"), kong.Description("Pollux ingest: submits, tracks and cancels jobs."),
		kong.Vars{"metrics_addr": ":9101"})
	os.Exit(app.Run(cli.Flags, "ingest", os.Stderr, func(ctx context.Context, env *app.Env) error {
		svc, err := ingest.New(ingest.Config{
			Routes: env.Routes, Options: env.Options(), Logger: env.Log, Metrics: env.Metrics.Ingest(), Learned: env.Stats.Lookup,
		}, env.JS, env.NS, env.Res, env.Life, env.Pauses)
		if err != nil {
			return err
		}
		return svc.Run(ctx)
	}))
}
