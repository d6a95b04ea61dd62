// Command ingest consumes Pollux's intake subjects: it submits jobs to
// providers exactly once, starts tracking jobs submitted elsewhere, cancels
// jobs, and rejects bad requests with an event naming the problem. With
// --http-addr it also serves the HTTP front door (internal/edge/frontdoor) with
// its jobs index and the console at /console/; --http-tokens-file gives it
// tokens. Without tokens it listens on loopback only, unless
// --http-insecure says otherwise, and answers only requests for localhost,
// a loopback address or --http-allowed-hosts (frontdoor.CheckExposure,
// the rule pollux serve follows too).
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/alecthomas/kong"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/edge/console"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/platform/version"
	"github.com/pollux-dev/pollux/internal/services/ingest"
	"github.com/pollux-dev/pollux/internal/wiring/app"
	"github.com/pollux-dev/pollux/pkg/logkey"
)

// cli is the command line.
type cli struct {
	app.Flags `embed:""`
	// The one flag without an environment twin: a variable left set in a
	// deployment would make every start print the version and exit.
	Version            kong.VersionFlag `name:"version" help:"Print the version and exit."`
	HTTPAddr           string           `name:"http-addr" env:"POLLUX_HTTP_ADDR" help:"Serve the HTTP front door (the API and the console at /console/) on this address; empty (the default) to disable."`
	app.FrontDoorFlags `embed:""`
}

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

// run is the command: it returns the exit code.
func run(args []string, stderr io.Writer) int {
	var c cli
	parser, err := kong.New(&c, kong.Name("ingest"), kong.Description("Pollux ingest: submits, tracks and cancels jobs."),
		kong.Vars{"version": version.String("ingest"), "metrics_addr": ":9101"}, kong.Writers(os.Stdout, stderr))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if _, err := parser.Parse(args); err != nil {
		fmt.Fprintln(stderr, "ingest:", err)
		return 2
	}
	if c.HTTPAddr != "" {
		if err := c.Check(c.HTTPAddr); err != nil {
			fmt.Fprintln(stderr, "ingest:", err)
			return 2
		}
	}
	return app.Run(c.Flags, "ingest", stderr, func(ctx context.Context, env *app.Env) error {
		if _, err := env.UseInputs(ctx, c.Inputs); err != nil {
			return err
		}
		svc, err := ingest.New(ingest.Config{
			Routes: env.Routes, ModelRoutes: env.ModelRoutes, NotifyURLs: env.Config.Notify.Submissions != nil, Apps: env.Config.AppNames(), Spend: env.Spend, Options: env.Options(), Logger: env.Log, Metrics: env.Metrics.Ingest(), Learned: env.Stats,
			Sweep:          env.Config.Streams.SweepInterval,
			RepairInterval: env.Config.RunningRepair.Interval, RepairGrace: env.Config.RunningRepair.Grace,
		}, env.JS, env.NS, env.Res, env.Jobs.Intake(), env.Gates)
		if err != nil {
			return err
		}
		g, ctx := errgroup.WithContext(ctx)
		if c.HTTPAddr != "" {
			cfg := frontdoor.Config{Console: console.Handler(), AllowedHosts: c.AllowedHosts, Logger: env.Log.With().Str(logkey.Component, "frontdoor").Logger()}
			if cfg.Tokens, err = c.Tokens(); err != nil {
				return err
			}
			fd, err := env.FrontDoor(ctx, g, cfg)
			if err != nil {
				return err
			}
			ln, err := frontdoor.Listen(c.HTTPAddr, cfg.Tokens != nil, c.Insecure)
			if err != nil {
				return err
			}
			g.Go(func() error { return fd.Run(ctx, ln) })
		}
		g.Go(func() error { return svc.Run(ctx) })
		return g.Wait()
	})
}
