package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/tools/simulate"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/schedule"
)

// SimulateCmd is `pollux simulate`: the real scheduling policy on a virtual
// clock against static pollers and the optimum, on built-in workloads, a
// trace, or the fleet's own finished jobs; and a change of a route's poll
// settings priced on that history.
type SimulateCmd struct {
	Workload []string       `name:"workload" env:"POLLUX_SIMULATE_WORKLOAD" sep:"," help:"Built-in workloads to run (default: all): lognormal-0.25, lognormal-0.5, lognormal-1, bimodal, heavy-tail, slowdown, early-failures, long-queue, midrun-failures, speedup, progress, webhook-2%, webhook-10%, webhook-30%, long-queue-rejected, mixed (six models at once), studio (six models with early rejections, 600 jobs each), fleet (six more: wide spreads, failures mid-run, a long queue, a speed-up; 600 jobs each), fleet-250 (fleet at 250 jobs each)."`
	Trace    string         `name:"trace" env:"POLLUX_SIMULATE_TRACE" type:"path" placeholder:"FILE.csv" help:"Replay this CSV trace (header model,submit_s,queue_s,duration_s,outcome; jobs in submit order) instead of the built-in workloads."`
	Strategy []string       `name:"strategy" env:"POLLUX_SIMULATE_STRATEGY" sep:"," help:"Strategies to compare (default: adaptive, seed-table, fixed:1, fixed:10, google, smithy, optimal, population on built-in workloads, and adaptive-fixed-quiet where jobs expect webhooks); any of adaptive, adaptive-fixed-quiet, seed-table, fixed:<seconds>, google, smithy, optimal, population (built-in workloads only: the plan of 100 000 other jobs of each model)."`
	Jobs     int            `name:"jobs" env:"POLLUX_SIMULATE_JOBS" default:"10000" help:"Jobs per built-in workload (per model of mixed; studio and fleet always draw 600 a model, fleet-250 250)."`
	Warmup   int            `name:"warmup" env:"POLLUX_SIMULATE_WARMUP" default:"100" help:"Leave each model's first N jobs out of the scores."`
	JSON     bool           `name:"json" env:"POLLUX_SIMULATE_JSON" help:"Print one JSON object a line per strategy and model instead of the table (with --what-if: one object)."`
	Plot     string         `name:"plot" env:"POLLUX_SIMULATE_PLOT" type:"path" placeholder:"FILE.svg" help:"Also sweep every strategy's knob and draw polls per job against mean detection delay, with the optimal frontier, to this SVG file."`
	Seed     uint64         `name:"seed" env:"POLLUX_SIMULATE_SEED" default:"1" help:"Seed of the workloads and the strategies' randomness."`
	PollCost *time.Duration `name:"poll-cost" env:"POLLUX_SIMULATE_POLL_COST" help:"Pollux's poll cost: one poll is worth this much detection delay (adaptive and optimal; default 2s; with --from-fleet the route's)."`
	MaxDelay *time.Duration `name:"max-delay" env:"POLLUX_SIMULATE_MAX_DELAY" help:"Pollux's longest interval between polls, the tolerated notification delay (adaptive, seed-table and optimal; default 60s; with --from-fleet the route's)."`

	FromFleet  bool           `name:"from-fleet" env:"POLLUX_SIMULATE_FROM_FLEET" help:"Replay the fleet's finished jobs of --route, read from the jobs bucket over NATS, under the route's poll settings from --config."`
	Route      string         `name:"route" env:"POLLUX_SIMULATE_ROUTE" help:"With --from-fleet: the route whose jobs are read (required)."`
	Model      string         `name:"model" env:"POLLUX_SIMULATE_MODEL" help:"With --from-fleet: only this model's jobs, all its configurations (default: all the route's models)."`
	Since      *time.Duration `name:"since" env:"POLLUX_SIMULATE_SINCE" help:"With --from-fleet: only jobs accepted within this long before now (default: all the jobs bucket holds, 7 days unless configured)."`
	Export     string         `name:"export" env:"POLLUX_SIMULATE_EXPORT" type:"path" placeholder:"FILE.csv" help:"With --from-fleet: also write the jobs read as a trace (--trace reads it back)."`
	ExportOnly bool           `name:"export-only" env:"POLLUX_SIMULATE_EXPORT_ONLY" help:"With --export: write the trace and stop, without simulating."`
	ConfigFile string         `name:"config" env:"POLLUX_CONFIG" default:"pollux.yaml" type:"path" help:"With --from-fleet: the configuration file (YAML or JSON) the route's poll settings are read from, the services' own."`
	WhatIf     []string       `name:"what-if" env:"POLLUX_SIMULATE_WHAT_IF" sep:"," placeholder:"SETTING=VALUE" help:"With --from-fleet or --trace: run Pollux twice on the same jobs, with the policy of today and with these settings changed, and print the difference; any of poll_cost=<duration>, min_delay=<duration>, max_delay=<duration>, jitter=<0..1>."`
	Connection `embed:""`
}

// Default settings of the policy when not the route's.
const (
	defaultPollCost = 2 * time.Second
	defaultMaxDelay = 60 * time.Second
)

// Run simulates and prints the comparison, or the what-if.
func (c *SimulateCmd) Run(g *Globals) error {
	changes, err := c.validate()
	if err != nil {
		return err
	}
	strategies := simulate.DefaultStrategies()
	if len(c.Strategy) == 0 && c.Trace == "" && !c.FromFleet {
		pop, _ := simulate.ParseStrategy(simulate.PopulationName)
		strategies = append(strategies, pop)
	}
	if len(c.Strategy) > 0 {
		strategies = nil
		for _, name := range c.Strategy {
			s, err := simulate.ParseStrategy(strings.TrimSpace(name))
			if err != nil {
				return fmt.Errorf("--strategy: %w", err)
			}
			strategies = append(strategies, s)
		}
	}
	policy := schedule.Policy{PollCost: defaultPollCost, MaxDelay: defaultMaxDelay}
	if c.PollCost != nil {
		policy.PollCost = *c.PollCost
	}
	if c.MaxDelay != nil {
		policy.MaxDelay = *c.MaxDelay
	}
	if c.FromFleet && !c.ExportOnly {
		var floor time.Duration
		if policy, floor, err = routePolicy(c.ConfigFile, c.Route); err != nil {
			return err
		}
		changed := policy
		for _, ch := range changes {
			ch.Apply(&changed)
		}
		if changed.MinDelay < floor {
			return fmt.Errorf("--what-if: min_delay %s is below the poll floor of route %s's provider, %s, which the route keeps", changed.MinDelay, c.Route, floor)
		}
	}
	cfg := simulate.Config{Policy: policy, Warmup: c.Warmup, Seed: c.Seed, Sweep: c.Plot != ""}

	var trace []simulate.Job
	switch {
	case c.FromFleet:
		if trace, err = c.readFleet(g); err != nil || c.ExportOnly {
			return err
		}
	case c.Trace != "":
		if trace, err = readTrace(c.Trace); err != nil {
			return err
		}
	}
	if kept, _ := scorable(trace, c.Warmup); trace != nil && len(kept) == 0 {
		return fmt.Errorf("--warmup %d: no model has more jobs than that, so none would be scored; lower it", c.Warmup)
	}
	if len(changes) > 0 {
		w, err := simulate.RunWhatIf(trace, changes, cfg)
		if err != nil {
			return fmt.Errorf("--what-if: %w", err)
		}
		if c.JSON {
			return w.WriteJSON(g.Stdout)
		}
		return w.Write(g.Stdout)
	}

	var results []*simulate.Result
	if trace != nil {
		if c.FromFleet {
			var dropped []string
			if trace, dropped = scorable(trace, c.Warmup); len(dropped) > 0 {
				fmt.Fprintf(g.Stderr, "left out, %d jobs or fewer (--warmup): %s\n", c.Warmup, strings.Join(dropped, ", "))
			}
		}
		res, err := simulate.Run(trace, strategies, cfg)
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
		wantPopulation := slices.ContainsFunc(strategies, func(s simulate.Strategy) bool { return s.Name == simulate.PopulationName })
		for i, w := range workloads {
			eg.Go(func() error {
				cfg := cfg
				if wantPopulation {
					cfg.Population = w.Population(simulate.PopulationJobs, c.Seed)
				}
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

// validate checks the flags together, each error naming its flag, and
// parses the --what-if changes.
func (c *SimulateCmd) validate() ([]simulate.Change, error) {
	var errs []error
	exclusive := func(a string, aSet bool, b string, bSet bool) {
		if aSet && bSet {
			errs = append(errs, fmt.Errorf("--%s and --%s exclude each other", a, b))
		}
	}
	exclusive("trace", c.Trace != "", "workload", len(c.Workload) > 0)
	exclusive("from-fleet", c.FromFleet, "trace", c.Trace != "")
	exclusive("from-fleet", c.FromFleet, "workload", len(c.Workload) > 0)
	exclusive("what-if", len(c.WhatIf) > 0, "strategy", len(c.Strategy) > 0)
	exclusive("what-if", len(c.WhatIf) > 0, "plot", c.Plot != "")
	exclusive("export-only", c.ExportOnly, "what-if", len(c.WhatIf) > 0)
	exclusive("export-only", c.ExportOnly, "plot", c.Plot != "")
	exclusive("from-fleet", c.FromFleet, "poll-cost", c.PollCost != nil)
	exclusive("from-fleet", c.FromFleet, "max-delay", c.MaxDelay != nil)
	if !c.FromFleet {
		for flag, set := range map[string]bool{"route": c.Route != "", "model": c.Model != "", "since": c.Since != nil, "export": c.Export != ""} {
			if set {
				errs = append(errs, fmt.Errorf("--%s: only with --from-fleet", flag))
			}
		}
	}
	if c.FromFleet && c.Route == "" {
		errs = append(errs, errors.New("--from-fleet: name the route with --route"))
	}
	if c.Route != "" && !events.ValidToken(c.Route) {
		errs = append(errs, fmt.Errorf("--route: %q is not a route name ([A-Za-z0-9_-])", c.Route))
	}
	if c.ExportOnly && c.Export == "" {
		errs = append(errs, errors.New("--export-only: name the file with --export"))
	}
	if len(c.WhatIf) > 0 && !c.FromFleet && c.Trace == "" {
		errs = append(errs, errors.New("--what-if: needs the jobs of --from-fleet or --trace"))
	}
	errs = append(errs, positive("jobs", c.Jobs), positive("seed", c.Seed))
	if c.PollCost != nil {
		errs = append(errs, positive("poll-cost", *c.PollCost))
	}
	if c.MaxDelay != nil {
		errs = append(errs, positive("max-delay", *c.MaxDelay))
	}
	if c.Since != nil {
		errs = append(errs, positive("since", *c.Since))
	}
	if c.Warmup < 0 {
		errs = append(errs, fmt.Errorf("--warmup: must be >= 0 (got %d)", c.Warmup))
	} else if c.Jobs <= c.Warmup && c.Trace == "" && !c.FromFleet {
		errs = append(errs, fmt.Errorf("--jobs %d leaves nothing to score after --warmup %d", c.Jobs, c.Warmup))
	}
	var changes []simulate.Change
	for _, s := range c.WhatIf {
		ch, err := simulate.ParseChange(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--what-if: %w", err))
			continue
		}
		if slices.ContainsFunc(changes, func(o simulate.Change) bool { return o.Setting == ch.Setting }) {
			errs = append(errs, fmt.Errorf("--what-if: %s: changed twice", ch.Setting))
		}
		changes = append(changes, ch)
	}
	return changes, errors.Join(errs...)
}

// routePolicy is the poll policy of route name in the configuration file
// at path, as the services build it, and the adapter's poll floor, which
// the policy's MinDelay never goes below. No call is made: the adapter is
// built with a stand-in token, and without webhooks, which the simulation
// does not model.
func routePolicy(path, name string) (schedule.Policy, time.Duration, error) {
	fail := func(err error) (schedule.Policy, time.Duration, error) {
		return schedule.Policy{}, 0, fmt.Errorf("--config %s: %w", path, err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		return fail(fmt.Errorf("%w (--from-fleet reads the route's poll settings from it)", err))
	}
	rc, ok := cfg.Routes[name]
	if !ok {
		return schedule.Policy{}, 0, fmt.Errorf("--route %s: no such route in %s (routes: %s)", name, path, strings.Join(cfg.RouteNames(), ", "))
	}
	opts, err := rc.OptionsJSON()
	if err != nil {
		return fail(fmt.Errorf("route %s: %w", name, err))
	}
	a, err := route.Registry.New(provider.Config{Route: name, Kind: rc.Kind, BaseURL: rc.BaseURL, Token: "simulate-makes-no-calls", Options: opts})
	if err != nil {
		return fail(err)
	}
	rc.WebhookURL = ""
	r, err := route.New(name, a, rc, 1)
	if err != nil {
		return fail(err)
	}
	return r.Policy, a.Info().PollFloor, nil
}

// readFleet reads the route's finished jobs over NATS, showing progress
// on stderr, and writes them to --export.
func (c *SimulateCmd) readFleet(g *Globals) ([]simulate.Job, error) {
	ctx, stop := signalContext()
	defer stop()
	nc, js, ns, err := c.open()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	res, err := ns.Open(ctx, js)
	if err != nil {
		return nil, err
	}
	h := simulate.History{Route: c.Route, Model: c.Model}
	if c.Since != nil {
		h.Since = time.Now().Add(-*c.Since)
	}
	var total uint64
	if st, err := res.Jobs.Status(ctx); err == nil {
		total = st.Values()
	}
	p := progress{w: g.Stderr, inPlace: isTerminal(g.Stderr), total: total, route: c.Route, last: time.Now()}
	f, err := simulate.ReadFleet(ctx, jobs.New(ns, js, res, jobs.Config{}), h, p.show)
	p.end()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(g.Stderr, "%d finished jobs of %s from %s, %d left out (expired, lost or canceled by the user)",
		len(f.Jobs), h, f.First.UTC().Format(time.RFC3339), f.Skipped)
	if f.Unreadable > 0 {
		fmt.Fprintf(g.Stderr, "; %d records did not decode", f.Unreadable)
	}
	fmt.Fprintln(g.Stderr)
	if c.Export != "" {
		if err := writeTrace(c.Export, f.Jobs); err != nil {
			return nil, err
		}
		fmt.Fprintf(g.Stderr, "trace written to %s\n", c.Export)
	}
	return f.Jobs, nil
}

// progress shows a read of the jobs bucket on stderr once it has taken a
// second, then at most once a second and at its end: in place on a
// terminal, a line at a time otherwise.
type progress struct {
	w          io.Writer
	inPlace    bool
	total      uint64
	route      string
	last       time.Time // of the last line, or of the start
	shown      bool
	read, kept int
}

func (p *progress) show(read, kept int) {
	p.read, p.kept = read, kept
	if time.Since(p.last) < time.Second {
		return
	}
	p.last, p.shown = time.Now(), true
	p.print()
}

// end shows the final count, if the read was long enough to be shown.
func (p *progress) end() {
	if !p.shown {
		return
	}
	p.print()
	if p.inPlace {
		fmt.Fprintln(p.w)
	}
}

func (p *progress) print() {
	of := ""
	if p.total > 0 {
		of = fmt.Sprintf(" of ~%d", p.total)
	}
	end := "\n"
	if p.inPlace {
		end = "\r"
	}
	fmt.Fprintf(p.w, "reading job records: %d%s, %d finished on route %s%s", p.read, of, p.kept, p.route, end)
}

// scorable leaves out the models with no more than warmup jobs, which
// would have none scored, and names them.
func scorable(trace []simulate.Job, warmup int) ([]simulate.Job, []string) {
	n := map[string]int{}
	for _, j := range trace {
		n[j.Model]++
	}
	var kept []simulate.Job
	var dropped []string
	for _, j := range trace {
		if n[j.Model] > warmup {
			kept = append(kept, j)
		} else if n[j.Model] > 0 {
			dropped = append(dropped, j.Model)
			n[j.Model] = 0
		}
	}
	return kept, dropped
}

func writeTrace(path string, trace []simulate.Job) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--export: %w", err)
	}
	if err := simulate.WriteTrace(f, trace); err != nil {
		_ = f.Close()
		return fmt.Errorf("--export %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--export %s: %w", path, err)
	}
	return nil
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
