// Package cli holds the commands of the pollux tool: dev (everything in one
// process on an embedded NATS server, with a demo workload), serve (the
// same, for your own clients), sim-provider, and the client commands
// submit, track, cancel, get, routes and jobs.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/internal/wiring/app"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// CLI is the pollux command line.
type CLI struct {
	LogLevel  string `name:"log-level" env:"POLLUX_LOG_LEVEL" default:"error" enum:"debug,info,warn,error" help:"Log level of the services run in process."`
	LogFormat string `name:"log-format" env:"POLLUX_LOG_FORMAT" default:"console" enum:"json,console" help:"Log format."`
	// The one flag without an environment twin: a variable left set would
	// make every command print the version and exit. The text is the
	// "version" variable (cmd/pollux: internal/platform/version).
	Version kong.VersionFlag `name:"version" help:"Print the version and exit."`

	Dev         DevCmd         `cmd:"" help:"Run all of Pollux in one process on an embedded NATS server with a simulated provider and a demo workload."`
	Serve       ServeCmd       `cmd:"" help:"Run all of Pollux in one process on an embedded NATS server with a simulated provider, for your clients, until interrupted."`
	SimProvider SimProviderCmd `cmd:"" name:"sim-provider" help:"Run the simulated provider (Replicate's wire format) on its own."`
	Simulate    SimulateCmd    `cmd:"" help:"Compare Pollux's polling policy with static pollers and the optimum on a virtual clock."`
	Submit      SubmitCmd      `cmd:"" help:"Submit a job over NATS and optionally wait for it to finish."`
	Stats       StatsCmd       `cmd:"" help:"Print the fleet's figures from JetStream and KV alone."`
	Watch       WatchCmd       `cmd:"" help:"Watch the fleet live, refreshed in place, until Ctrl-C."`
	Get         GetCmd         `cmd:"" help:"Show one job's record and event history."`
	Track       TrackCmd       `cmd:"" help:"Track a job submitted elsewhere (by its provider's id) and optionally wait for it to finish."`
	Cancel      CancelCmd      `cmd:"" help:"Cancel a job, with a reason kept in its record; or several, or all a filter matches, through the front door once confirmed."`
	Resubmit    ResubmitCmd    `cmd:"" help:"Resubmit failed, lost or expired jobs as new jobs linked to them, through the front door once confirmed."`
	Routes      RoutesCmd      `cmd:"" help:"List the routes; pause and resume one across the fleet."`
	Jobs        JobsCmd        `cmd:"" help:"List jobs, newest first, filtered, from a front door's index (GET /v1/jobs)."`
	Bench       BenchCmd       `cmd:"" help:"Measure the fleet against JetStream's own limits and print one table (make bench)."`
}

// Globals are what subcommands get from the top level.
type Globals struct {
	Stdout, Stderr io.Writer
	// Stdin is where a command asks for confirmation (when a terminal).
	Stdin io.Reader
	Log   zerolog.Logger
}

// signalContext is canceled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// DevCmd is `pollux dev`.
type DevCmd struct {
	NATSURL   string        `name:"nats-url" env:"POLLUX_NATS_URL" help:"Use this NATS server instead of the embedded one."`
	DataDir   string        `name:"data-dir" env:"POLLUX_DATA_DIR" help:"Keep the embedded server's JetStream files here (default: a temporary directory, removed at exit)."`
	Jobs      int           `name:"jobs" env:"POLLUX_DEV_JOBS" default:"200" help:"Demo jobs to submit."`
	TimeScale float64       `name:"time-scale" env:"POLLUX_DEV_TIME_SCALE" default:"20" help:"Time compression: 20 makes a 60 s generation take 3 s."`
	Timeout   time.Duration `name:"timeout" env:"POLLUX_DEV_TIMEOUT" default:"5m" help:"Give up waiting for the jobs after this long."`
	Seed      int64         `name:"seed" env:"POLLUX_DEV_SEED" help:"Seed the simulation for a reproducible run (default: random)."`
	JSON      bool          `name:"json" env:"POLLUX_DEV_JSON" help:"Print the summary as one JSON object."`
	NoWebhook bool          `name:"no-webhooks" env:"POLLUX_DEV_NO_WEBHOOKS" help:"Run poll-only, to compare the schedule alone with a fixed-interval poller."`
}

// Run runs the demo.
func (c *DevCmd) Run(g *Globals) error {
	if err := errors.Join(positive("jobs", c.Jobs), positive("time-scale", c.TimeScale), positive("timeout", c.Timeout)); err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	progress := g.Stderr
	if c.JSON {
		progress = io.Discard
	}
	fmt.Fprintf(progress, "Pollux dev: %d demo jobs through ingest, poller and webhook on %s, time compressed %g×\n",
		c.Jobs, map[bool]string{true: c.NATSURL, false: "an embedded NATS server"}[c.NATSURL != ""], c.TimeScale)
	sum, err := dev.Run(ctx, dev.Config{
		NATSURL: c.NATSURL, DataDir: c.DataDir, Jobs: c.Jobs, TimeScale: c.TimeScale,
		Timeout: c.Timeout, Seed: c.Seed, NoWebhooks: c.NoWebhook, Progress: progress, ProgressInPlace: isTerminal(progress), Logger: g.Log,
	})
	if sum != nil {
		if c.JSON {
			enc := json.NewEncoder(g.Stdout)
			if jerr := enc.Encode(sum); jerr != nil {
				return jerr
			}
		} else {
			sum.Print(g.Stdout)
		}
	}
	return err
}

// ServeCmd is `pollux serve`.
type ServeCmd struct {
	NATSURL      string  `name:"nats-url" env:"POLLUX_NATS_URL" help:"Use this NATS server instead of the embedded one."`
	DataDir      string  `name:"data-dir" env:"POLLUX_DATA_DIR" help:"Keep the embedded server's JetStream files here (default: a temporary directory, removed at exit)."`
	NATSAddr     string  `name:"nats-addr" env:"POLLUX_NATS_ADDR" default:"127.0.0.1:4222" help:"Address of the embedded NATS server (port 0: a free one); it has no authentication, so beyond loopback it needs --nats-insecure."`
	NATSInsecure bool    `name:"nats-insecure" env:"POLLUX_NATS_INSECURE" help:"Let the embedded NATS server, which has no authentication, listen beyond loopback; refused otherwise."`
	HTTPAddr     string  `name:"http-addr" env:"POLLUX_HTTP_ADDR" default:"127.0.0.1:8081" help:"Address of the HTTP front door; beyond loopback it needs --http-tokens-file or --http-insecure."`
	Metrics      string  `name:"metrics-addr" env:"POLLUX_METRICS_ADDR" default:"127.0.0.1:9101" help:"Address of /metrics, /healthz and /readyz (port 0: a free one)."`
	TimeScale    float64 `name:"time-scale" env:"POLLUX_DEV_TIME_SCALE" default:"20" help:"Time compression: 20 makes a 60 s generation take 3 s."`
	NoWebhook    bool    `name:"no-webhooks" env:"POLLUX_DEV_NO_WEBHOOKS" help:"Run poll-only."`
	// The front door's access flags, as cmd/ingest has them.
	app.FrontDoorFlags `embed:""`
}

// Run serves until SIGINT or SIGTERM. It prints the variables the clients
// read (POLLUX_NATS_URL, NATS_URL, POLLUX_HTTP_URL) as shell assignments on
// stdout, and how to use them on stderr.
func (c *ServeCmd) Run(g *Globals) error {
	if err := positive("time-scale", c.TimeScale); err != nil {
		return err
	}
	tokens, err := c.Tokens()
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	return dev.Serve(ctx, dev.ServeConfig{
		NATSURL: c.NATSURL, NATSAddr: c.NATSAddr, NATSInsecure: c.NATSInsecure, DataDir: c.DataDir, TimeScale: c.TimeScale, HTTPAddr: c.HTTPAddr,
		HTTPTokens: tokens, HTTPInsecure: c.Insecure, HTTPAllowedHosts: c.AllowedHosts,
		MetricsAddr: c.Metrics, NoWebhooks: c.NoWebhook, Logger: g.Log,
	}, func(e dev.Endpoints, _ *dev.Stack) {
		fmt.Fprint(g.Stdout, e.Env())
		fmt.Fprintf(g.Stderr, "Pollux is running: route %q on the simulated provider (models %s), time compressed %g×. Ctrl-C stops it.\n"+
			"  NATS        %s\n  front door  %s\n  console     %s\n  metrics     %s\n"+
			"In another terminal: export POLLUX_NATS_URL=%s, then pollux submit --route %s --model pollux-demo/preview --wait\n"+
			"Try the examples (docs/contract.md): NATS_URL=%s POLLUX_HTTP_URL=%s examples/cli/run.sh\n",
			dev.RouteName, strings.Join(slices.Sorted(maps.Keys(dev.DefaultModels())), ", "), c.TimeScale,
			e.NATSURL, e.HTTPURL, dev.ConsoleURL(e.HTTPURL), e.MetricsURL, e.NATSURL, dev.RouteName, e.NATSURL, e.HTTPURL)
		switch {
		case tokens != nil:
			fmt.Fprintf(g.Stderr, "The front door takes the %d tokens of %s (Authorization: Bearer, or the console's login).\n", tokens.Len(), c.TokensFile)
		case frontdoor.CheckExposure(c.HTTPAddr, false, false) != nil:
			fmt.Fprintf(g.Stderr, "WARNING: the front door on %s has no tokens and listens beyond loopback (--http-insecure): anyone who reaches it may act.\n", c.HTTPAddr)
		}
	})
}

// SimProviderCmd is `pollux sim-provider`.
type SimProviderCmd struct {
	Addr      string   `name:"addr" env:"POLLUX_SIM_ADDR" default:"127.0.0.1:8090" help:"Address to listen on."`
	Config    string   `name:"config" env:"POLLUX_SIM_CONFIG" help:"Simulator config file (YAML or JSON): models, faults, time scale."`
	TimeScale *float64 `name:"time-scale" env:"POLLUX_SIM_TIME_SCALE" help:"Override the config's time scale (> 0)."`
	Seed      *int64   `name:"seed" env:"POLLUX_SIM_SEED" help:"Override the config's seed (not 0: leave the flag out for a random seed)."`
	TokenEnv  string   `name:"token-env" env:"POLLUX_SIM_TOKEN_ENV" help:"Require the API token held in this environment variable."`
}

// Run serves the simulator until interrupted.
func (c *SimProviderCmd) Run(g *Globals) error {
	if c.TimeScale != nil {
		if err := positive("time-scale", *c.TimeScale); err != nil {
			return err
		}
	}
	if c.Seed != nil && *c.Seed == 0 {
		return errors.New("--seed: must not be 0 (leave the flag out for a random seed)")
	}
	ctx, stop := signalContext()
	defer stop()
	var cfg sim.Config
	if c.Config != "" {
		var err error
		if cfg, err = sim.LoadConfig(c.Config); err != nil {
			return err
		}
	}
	if c.TimeScale != nil {
		cfg.TimeScale = *c.TimeScale
	}
	if c.Seed != nil {
		cfg.Seed = *c.Seed
	}
	if c.TokenEnv != "" {
		cfg.Token = os.Getenv(c.TokenEnv)
		if cfg.Token == "" {
			return fmt.Errorf("token-env: %s is not set", c.TokenEnv)
		}
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return err
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "http://" + ln.Addr().String()
	}
	cfg.Logger = g.Log
	s, err := sim.New(cfg)
	if err != nil {
		_ = ln.Close()
		return err
	}
	fmt.Fprintf(g.Stderr, "simulated provider (Replicate wire format) on %s — ground truth at %s/_sim/stats\n", cfg.BaseURL, cfg.BaseURL)
	eg, ectx := errgroup.WithContext(ctx)
	eg.Go(func() error { return app.ServeHTTP(ectx, "simulated provider", ln, s.Handler()) })
	eg.Go(func() error { return s.Run(ectx) })
	if err := eg.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
