// Command ingest consumes Pollux's intake subjects: it submits jobs to
// providers exactly once, starts tracking jobs submitted elsewhere, cancels
// jobs, and rejects bad requests with an event naming the problem. With
// --http-addr it also serves the HTTP front door (internal/frontdoor),
// which takes bearer tokens from --http-tokens-file.
package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"

	"github.com/alecthomas/kong"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/app"
	"github.com/pollux-dev/pollux/internal/frontdoor"
	"github.com/pollux-dev/pollux/internal/ingest"
	"github.com/pollux-dev/pollux/internal/version"
)

func main() {
	var cli struct {
		app.Flags `embed:""`
		// The one flag without an environment twin: a variable left set in a
		// deployment would make every start print the version and exit.
		Version  kong.VersionFlag `name:"version" help:"Print the version and exit."`
		HTTPAddr string           `name:"http-addr" env:"POLLUX_HTTP_ADDR" help:"Serve the HTTP front door (POST /v1/jobs, ...) on this address; empty (the default) to disable."`
		Tokens   string           `name:"http-tokens-file" env:"POLLUX_HTTP_TOKENS_FILE" type:"path" help:"File of bearer tokens the front door accepts, one per line (# comments). Without it the front door has no authentication: keep it on a private network."`
	}
	kong.Parse(&cli, kong.Name("ingest"), kong.Description("Pollux ingest: submits, tracks and cancels jobs."),
		kong.Vars{"version": version.String("ingest"), "metrics_addr": ":9101"})
	os.Exit(app.Run(cli.Flags, "ingest", os.Stderr, func(ctx context.Context, env *app.Env) error {
		svc, err := ingest.New(ingest.Config{
			Routes: env.Routes, Options: env.Options(), Logger: env.Log, Metrics: env.Metrics.Ingest(), Learned: env.Stats.Lookup,
			Sweep:          env.Config.Streams.SweepInterval,
			RepairInterval: env.Config.RunningRepair.Interval, RepairGrace: env.Config.RunningRepair.Grace,
		}, env.JS, env.NS, env.Res, env.Jobs, env.Pauses)
		if err != nil {
			return err
		}
		g, ctx := errgroup.WithContext(ctx)
		if cli.HTTPAddr != "" {
			cfg := frontdoor.Config{Routes: slices.Sorted(maps.Keys(env.Routes)), Logger: env.Log}
			if cli.Tokens != "" {
				if cfg.Tokens, err = frontdoor.LoadTokens(cli.Tokens); err != nil {
					return err
				}
			}
			fd, err := frontdoor.New(cfg, env.JS, env.NS, env.Res, env.Jobs)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", cli.HTTPAddr)
			if err != nil {
				return fmt.Errorf("front door listener: %w", err)
			}
			if cfg.Tokens == nil && !loopback(ln.Addr()) {
				env.Log.Warn().Str("addr", ln.Addr().String()).
					Msg("the front door has no authentication and listens beyond loopback; set --http-tokens-file or keep it on a private network")
			}
			g.Go(func() error { return fd.Run(ctx, ln) })
		}
		g.Go(func() error { return svc.Run(ctx) })
		return g.Wait()
	}))
}

// loopback reports whether addr accepts connections from this host only.
func loopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
