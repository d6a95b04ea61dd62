// Command webhook receives provider webhooks at POST /webhooks/<route>,
// verifies them, stores them in JetStream and applies them to job state;
// when the configuration names endpoints (notify), delivers job events to
// applications (package notify); and when a route keeps its outputs (or
// the custody section is set), keeps succeeded jobs' outputs and warns
// before they expire (package custody).
package main

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/alecthomas/kong"

	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/platform/version"
	"github.com/pollux-dev/pollux/internal/services/custody"
	"github.com/pollux-dev/pollux/internal/services/notify"
	"github.com/pollux-dev/pollux/internal/services/webhook"
	"github.com/pollux-dev/pollux/internal/wiring/app"
)

func main() {
	var cli struct {
		app.Flags `embed:""`
		// The one flag without an environment twin: a variable left set in a
		// deployment would make every start print the version and exit.
		Version kong.VersionFlag `name:"version" help:"Print the version and exit."`
		Addr    string           `name:"addr" env:"POLLUX_WEBHOOK_ADDR" default:":8080" help:"Address to receive webhooks on."`
	}
	kong.Parse(&cli, kong.Name("webhook"), kong.Description("Pollux webhook receiver."),
		kong.Vars{"version": version.String("webhook"), "metrics_addr": ":9103"})
	os.Exit(app.Run(cli.Flags, "webhook", os.Stderr, func(ctx context.Context, env *app.Env) error {
		svc, err := webhook.New(webhook.Config{
			Routes: env.Routes, Options: env.Options(), Logger: env.Log, Metrics: env.Metrics.Webhook(),
			Sweep: env.Config.Streams.SweepInterval,
		}, env.JS, env.NS, env.Res, env.Jobs.Webhooks())
		if err != nil {
			return err
		}
		// Outbound webhooks and output custody run here too: the webhook
		// processes are the ones that speak HTTP to the outside.
		var runs []func(context.Context) error
		if notify.Enabled(env.Config.Notify) {
			out, err := notify.New(notify.Config{Notify: env.Config.Notify, Routes: app.NotifyRoutes(env.Config), KeepsOutputs: env.KeepsOutputs,
				Options: env.Options(), Logger: env.Log, Metrics: env.Metrics.Notify(app.NotifyEndpoints(env.Config))}, env.JS, env.NS)
			if err != nil {
				return err
			}
			runs = append(runs, out.Run)
		}
		if env.Config.CustodyEnabled() {
			keep, err := custody.New(app.Custody(env), env.JS, env.NS, env.Jobs.Custody())
			if err != nil {
				return err
			}
			runs = append(runs, keep.Run)
		}
		ln, err := net.Listen("tcp", cli.Addr)
		if err != nil {
			return fmt.Errorf("webhook listener: %w", err)
		}
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() error { return svc.Run(gctx, ln) })
		for _, run := range runs {
			g.Go(func() error { return run(gctx) })
		}
		return g.Wait()
	}))
}
