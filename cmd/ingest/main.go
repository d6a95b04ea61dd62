// Command ingest consumes Pollux's intake subjects: it submits jobs to
// providers exactly once, starts tracking jobs submitted elsewhere, cancels
// jobs, and rejects bad requests with an event naming the problem. With
// --http-addr it also serves the HTTP front door (internal/frontdoor) with
// its jobs index and the console at /console/; --http-tokens-file gives it
// tokens. Without tokens it listens on loopback only, unless
// --http-insecure says otherwise.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/alecthomas/kong"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/app"
	"github.com/pollux-dev/pollux/internal/console"
	"github.com/pollux-dev/pollux/internal/frontdoor"
	"github.com/pollux-dev/pollux/internal/ingest"
	"github.com/pollux-dev/pollux/internal/version"
)

// cli is the command line.
type cli struct {
	app.Flags `embed:""`
	// The one flag without an environment twin: a variable left set in a
	// deployment would make every start print the version and exit.
	Version  kong.VersionFlag `name:"version" help:"Print the version and exit."`
	HTTPAddr string           `name:"http-addr" env:"POLLUX_HTTP_ADDR" help:"Serve the HTTP front door (the API and the console at /console/) on this address; empty (the default) to disable."`
	Tokens   string           `name:"http-tokens-file" env:"POLLUX_HTTP_TOKENS_FILE" type:"path" help:"File of the front door's tokens, one a line: TOKEN [act|read] [name=WHO] (# comments); reread when it changes. Without it anyone who reaches the front door may act."`
	Insecure bool             `name:"http-insecure" env:"POLLUX_HTTP_INSECURE" help:"Serve the front door without tokens beyond loopback (behind a gateway that authenticates); refused otherwise."`
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
		if err := exposure(c.HTTPAddr, c.Tokens != "", c.Insecure); err != nil {
			fmt.Fprintln(stderr, "ingest:", err)
			return 2
		}
	}
	return app.Run(c.Flags, "ingest", stderr, func(ctx context.Context, env *app.Env) error {
		svc, err := ingest.New(ingest.Config{
			Routes: env.Routes, ModelRoutes: env.ModelRoutes, NotifyURLs: env.Config.Notify.Submissions != nil, Options: env.Options(), Logger: env.Log, Metrics: env.Metrics.Ingest(), Learned: env.Stats,
			Sweep:          env.Config.Streams.SweepInterval,
			RepairInterval: env.Config.RunningRepair.Interval, RepairGrace: env.Config.RunningRepair.Grace,
		}, env.JS, env.NS, env.Res, env.Jobs, env.Pauses)
		if err != nil {
			return err
		}
		g, ctx := errgroup.WithContext(ctx)
		if c.HTTPAddr != "" {
			cfg := frontdoor.Config{Console: console.Handler(), Logger: env.Log.With().Str("component", "frontdoor").Logger()}
			if c.Tokens != "" {
				if cfg.Tokens, err = frontdoor.LoadTokens(c.Tokens); err != nil {
					return err
				}
			}
			fd, err := env.FrontDoor(ctx, g, cfg)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", c.HTTPAddr)
			if err != nil {
				return fmt.Errorf("front door listener: %w", err)
			}
			if cfg.Tokens == nil && !loopback(ln.Addr()) {
				env.Log.Warn().Str("addr", ln.Addr().String()).
					Msg("the front door has no tokens and listens beyond loopback (--http-insecure): anyone who reaches it may act")
			}
			g.Go(func() error { return fd.Run(ctx, ln) })
		}
		g.Go(func() error { return svc.Run(ctx) })
		return g.Wait()
	})
}

// exposure refuses a front door without tokens on an address beyond
// loopback, unless insecure: anyone reaching it could submit, cancel and
// pause. A host name counts as loopback when every address it resolves to
// is one.
func exposure(addr string, tokens, insecure bool) error {
	if tokens || insecure {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--http-addr %q: %w", addr, err)
	}
	if loopbackHost(host) {
		return nil
	}
	return errors.New("--http-addr " + addr + " listens beyond loopback and the front door has no tokens: " +
		"give it --http-tokens-file (POLLUX_HTTP_TOKENS_FILE), listen on 127.0.0.1, " +
		"or set --http-insecure (POLLUX_HTTP_INSECURE) if a gateway in front authenticates")
}

// loopbackHost reports whether host names this machine only.
func loopbackHost(host string) bool {
	if host == "" {
		return false // every interface
	}
	if frontdoor.Loopback(host) {
		return true
	}
	if net.ParseIP(host) != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return false
		}
	}
	return true
}

// loopback reports whether addr accepts connections from this host only.
func loopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
