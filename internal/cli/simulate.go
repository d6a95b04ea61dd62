package cli

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/simulate"
	"github.com/pollux-dev/pollux/pkg/schedule"
)

// SimulateCmd is `pollux simulate`: the real scheduling policy on a virtual
// clock against static pollers and the optimum, on built-in workloads or a
// trace.
type SimulateCmd struct {
	Workload []string      `name:"workload" env:"POLLUX_SIMULATE_WORKLOAD" sep:"," help:"Built-in workloads to run (default: all): lognormal-0.25, lognormal-0.5, lognormal-1, bimodal, heavy-tail, slowdown, early-failures."`
	Trace    string        `name:"trace" env:"POLLUX_SIMULATE_TRACE" type:"path" placeholder:"FILE.csv" help:"Replay this CSV trace (header model,submit_s,queue_s,duration_s,outcome; jobs in submit order) instead of the built-in workloads."`
	Strategy []string      `name:"strategy" env:"POLLUX_SIMULATE_STRATEGY" sep:"," help:"Strategies to compare (default: adaptive, seed-table, fixed:1, fixed:10, google, smithy, optimal); any of adaptive, seed-table, fixed:<seconds>, google, smithy, optimal."`
	Jobs     int           `name:"jobs" env:"POLLUX_SIMULATE_JOBS" default:"10000" help:"Jobs per built-in workload."`
	Warmup   int           `name:"warmup" env:"POLLUX_SIMULATE_WARMUP" default:"100" help:"Leave each model's first N jobs out of the scores."`
	JSON     bool          `name:"json" env:"POLLUX_SIMULATE_JSON" help:"Print one JSON object a line per strategy and model instead of the table."`
	Plot     string        `name:"plot" env:"POLLUX_SIMULATE_PLOT" type:"path" placeholder:"FILE.svg" help:"Also sweep every strategy's knob and draw polls per job against mean detection delay, with the optimal frontier, to this SVG file."`
	Seed     uint64        `name:"seed" env:"POLLUX_SIMULATE_SEED" default:"1" help:"Seed of the workloads and the strategies' randomness."`
	PollCost time.Duration `name:"poll-cost" env:"POLLUX_SIMULATE_POLL_COST" default:"2s" help:"Pollux's poll cost: one poll is worth this much detection delay (adaptive and optimal)."`
	MaxDelay time.Duration `name:"max-delay" env:"POLLUX_SIMULATE_MAX_DELAY" default:"60s" help:"Pollux's longest interval between polls, the tolerated notification delay (adaptive, seed-table and optimal)."`
}

// Run simulates and prints the comparison.
func (c *SimulateCmd) Run(g *Globals) error {
	if c.Trace != "" && len(c.Workload) > 0 {
		return errors.New("--trace and --workload exclude each other")
	}
	if err := errors.Join(positive("jobs", c.Jobs), positive("poll-cost", c.PollCost),
		positive("max-delay", c.MaxDelay), positive("seed", c.Seed)); err != nil {
		return err
	}
	if c.Jobs <= c.Warmup && c.Trace == "" {
		return fmt.Errorf("--jobs %d leaves nothing to score after --warmup %d", c.Jobs, c.Warmup)
	}
	if c.Warmup < 0 {
		return errors.New("--warmup must be >= 0")
	}
	strategies := simulate.DefaultStrategies()
	if len(c.Strategy) > 0 {
		strategies = nil
		for _, name := range c.Strategy {
			s, err := simulate.ParseStrategy(strings.TrimSpace(name))
			if err != nil {
				return err
			}
			strategies = append(strategies, s)
		}
	}
	cfg := simulate.Config{
		Policy: schedule.Policy{PollCost: c.PollCost, MaxDelay: c.MaxDelay},
		Warmup: c.Warmup, Seed: c.Seed, Sweep: c.Plot != "",
	}

	var results []*simulate.Result
	if c.Trace != "" {
		jobs, err := readTrace(c.Trace)
		if err != nil {
			return err
		}
		res, err := simulate.Run(jobs, strategies, cfg)
		if err != nil {
			return err
		}
		if !c.JSON {
			for _, m := range res.Models {
				fmt.Fprintf(g.Stderr, "%-15s %d jobs, %d scored, median %.1f s\n", m.Name, m.Jobs, m.Scored, m.Median)
			}
		}
		results = append(results, res)
	} else {
		names := c.Workload
		if len(names) == 0 {
			names = simulate.WorkloadNames()
		}
		var workloads []simulate.Workload
		for _, name := range names {
			w, err := simulate.LookupWorkload(strings.TrimSpace(name))
			if err != nil {
				return err
			}
			workloads = append(workloads, w)
			if !c.JSON {
				fmt.Fprintf(g.Stderr, "%-15s %s\n", w.Name, w.About)
			}
		}
		results = make([]*simulate.Result, len(workloads))
		var eg errgroup.Group
		eg.SetLimit(runtime.GOMAXPROCS(0))
		for i, w := range workloads {
			eg.Go(func() error {
				var err error
				results[i], err = simulate.Run(w.Jobs(c.Jobs, c.Seed), strategies, cfg)
				return err
			})
		}
		if err := eg.Wait(); err != nil {
			return err
		}
	}

	if c.Plot != "" {
		if err := writePlot(c.Plot, results); err != nil {
			return err
		}
	}
	if c.JSON {
		return simulate.WriteJSON(g.Stdout, results...)
	}
	p := results[0].Policy
	fmt.Fprintf(g.Stdout, "\npoll cost %s, delays within [%s, %s], each model's first %d jobs not scored; delays in seconds\n\n",
		p.PollCost, p.MinDelay, p.MaxDelay, c.Warmup)
	return simulate.WriteTable(g.Stdout, results...)
}

func readTrace(path string) ([]simulate.Job, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	jobs, err := simulate.ReadTrace(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return jobs, nil
}

func writePlot(path string, results []*simulate.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := simulate.WritePlot(f, results...); err != nil {
		_ = f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
