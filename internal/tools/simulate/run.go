package simulate

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

// Config configures a simulation. Zero values mean the defaults on each
// field.
type Config struct {
	// Policy is Pollux's policy, used by adaptive, seed-table and optimal
	// (MinDelay, MaxDelay and Jitter apply to all three; PollCost is
	// adaptive's and optimal's setting). Default: schedule.Policy's.
	Policy schedule.Policy
	// Warmup is how many of each model's first jobs are left out of the
	// scores (default 0; the CLI's default is 100).
	Warmup int
	// Seed makes a run reproducible (default 1).
	Seed uint64
	// Refresh is how many completions of a model pass before adaptive is
	// handed a fresh copy of the model's learned distributions (default
	// 16; 1 follows every completion, like a poller watching the bucket,
	// and costs a plan build per completion).
	Refresh int
	// Sweep also runs each strategy across its knob, for a plot.
	Sweep bool
	// Population holds many more jobs of every model of the run, drawn
	// apart from its jobs (Workload.Population): the strategy population
	// plans each model's durations in it, where optimal plans the very
	// jobs it is scored on. Needed by population alone.
	Population []Job
}

func (c Config) withDefaults() Config {
	c.Policy = c.Policy.WithDefaults()
	c.Seed = cmp.Or(c.Seed, 1)
	c.Refresh = cmp.Or(c.Refresh, 16)
	return c
}

// Result is what a simulation found.
type Result struct {
	// Models are the models simulated, in order of their first job.
	Models []ModelInfo
	// Scores are each strategy's figures at its default setting, by model
	// and then in the order the strategies were given.
	Scores []Score
	// Matches compare adaptive with seed-table at matched delay, by model,
	// when both strategies ran.
	Matches []Match
	// Sweeps are, with Config.Sweep, each strategy's points across its
	// knob, by model; the strategy "frontier" is the optimal frontier.
	Sweeps []Sweep
	// Policy is the policy the run used, defaults filled in.
	Policy schedule.Policy
}

// ModelInfo describes one model of a run.
type ModelInfo struct {
	Name   string  // the model's name
	Jobs   int     // all of the model's jobs
	Scored int     // those after the warm-up
	Median float64 // of the durations, seconds
	// Progress is true when the provider reports the model's jobs'
	// progress: a signal the optimal frontier, without any, lacks.
	Progress bool
}

// Match is adaptive against seed-table on one model, with adaptive's poll
// cost raised as far as its mean and p95 delays stay no worse than
// seed-table's.
type Match struct {
	// Model is the model compared.
	Model string
	// Seed is seed-table at its default.
	Seed Score
	// Adaptive is adaptive at the largest poll cost found (to 2%) whose
	// mean and p95 delays are no worse than Seed's; nil when even the
	// smallest tried (matchFrom) is worse.
	Adaptive *Score
}

// Ratio is how many times fewer polls per job adaptive makes than
// seed-table; 0 without a match.
func (m Match) Ratio() float64 {
	if m.Adaptive == nil {
		return 0
	}
	return m.Seed.PollsPerJob / m.Adaptive.PollsPerJob
}

// Sweep is one strategy's points on one model.
type Sweep struct {
	Model    string  // the model
	Strategy string  // the strategy, or "frontier"
	Points   []Point // by knob; the frontier's by mean delay
}

// Knob settings of the sweeps.
var (
	// frontierCosts are the poll costs, in seconds, the frontier is drawn
	// from: from a poll as often as MinDelay allows to one every MaxDelay.
	frontierCosts = geometric(0.01, 5000, math.Sqrt2)
	adaptiveCosts = geometric(0.25, 64, 2)
	factors       = []float64{0.25, 0.5, 1, 2, 4}
)

// The matched comparison bisects adaptive's poll cost, in log space,
// between matchFrom and matchTo seconds, matchSteps times (to 2%).
const (
	matchFrom, matchTo = 0.25, 1000.0
	matchSteps         = 9
)

func geometric(from, to, step float64) []float64 {
	var xs []float64
	for x := from; x <= to*1.0001; x *= step {
		xs = append(xs, x)
	}
	return xs
}

// Run simulates the strategies over the jobs (in submit order) and scores
// them against the optimal frontier of each model.
func Run(jobs []Job, strategies []Strategy, cfg Config) (*Result, error) {
	if len(jobs) == 0 {
		return nil, errors.New("simulate: no jobs")
	}
	if len(strategies) == 0 {
		return nil, errors.New("simulate: no strategies")
	}
	for i := 1; i < len(jobs); i++ {
		if jobs[i].Submit < jobs[i-1].Submit {
			return nil, fmt.Errorf("simulate: job %d is submitted before job %d; jobs must be in submit order", i, i-1)
		}
	}
	cfg = cfg.withDefaults()
	r, err := newRun(jobs, cfg)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(strategies, func(s Strategy) bool { return s.kind == population }) {
		if err := r.withPopulation(cfg.Population); err != nil {
			return nil, err
		}
	}
	strategies = withFixedQuiet(strategies, jobs)
	res := &Result{Policy: cfg.Policy}
	for _, md := range r.models {
		if len(md.scored) == 0 {
			return nil, fmt.Errorf("simulate: model %s has no jobs after the warm-up of %d", md.name, cfg.Warmup)
		}
		res.Models = append(res.Models, ModelInfo{Name: md.name, Jobs: len(md.durations), Scored: len(md.scored), Median: md.median, Progress: md.progress})
	}

	// Every run of a strategy at one setting for all models, in parallel.
	type task struct {
		s     Strategy
		knob  float64
		def   bool // the strategy's default setting
		score []Score
	}
	frontierS := Strategy{Name: "frontier", kind: optimal}
	var tasks []*task
	for _, c := range frontierCosts {
		tasks = append(tasks, &task{s: frontierS, knob: c})
	}
	for _, s := range strategies {
		tasks = append(tasks, &task{s: s, knob: cfg.knob(s), def: true})
		if !cfg.Sweep || s.kind == optimal || s.kind == population { // optimal's sweep is the frontier
			continue
		}
		knobs := factors
		if s.kind == adaptive || s.kind == fixedQuiet {
			knobs = adaptiveCosts
		}
		for _, k := range knobs {
			if k != cfg.knob(s) {
				tasks = append(tasks, &task{s: s, knob: k})
			}
		}
	}
	parallel(len(tasks), func(i int) {
		t := tasks[i]
		t.score = r.run(t.s, r.same(t.knob))
	})

	frontiers := make([]frontier, len(r.models))
	for m := range r.models {
		var pts []Point
		for _, t := range tasks {
			if t.s == frontierS {
				pts = append(pts, pointOf(t.score[m]))
			}
		}
		frontiers[m] = newFrontier(pts)
	}
	for m := range r.models {
		for _, s := range strategies {
			for _, t := range tasks {
				if t.s == s && t.def {
					sc := t.score[m]
					frontiers[m].compare(&sc)
					res.Scores = append(res.Scores, sc)
				}
			}
		}
	}
	if cfg.Sweep {
		for m, md := range r.models {
			res.Sweeps = append(res.Sweeps, Sweep{Model: md.name, Strategy: frontierS.Name, Points: frontiers[m]})
			for _, s := range strategies {
				if s.kind == optimal || s.kind == population {
					continue
				}
				sw := Sweep{Model: md.name, Strategy: s.Name}
				for _, t := range tasks {
					if t.s == s {
						sw.Points = append(sw.Points, pointOf(t.score[m]))
					}
				}
				slices.SortFunc(sw.Points, func(a, b Point) int { return cmpFloat(a.Knob, b.Knob) })
				res.Sweeps = append(res.Sweeps, sw)
			}
		}
	}

	ai := slices.IndexFunc(strategies, func(s Strategy) bool { return s.kind == adaptive })
	si := slices.IndexFunc(strategies, func(s Strategy) bool { return s.kind == seedTable })
	if ai >= 0 && si >= 0 {
		var seed []Score
		for _, t := range tasks {
			if t.s == strategies[si] && t.def {
				seed = t.score
			}
		}
		res.Matches = r.match(strategies[ai], seed, frontiers)
	}
	return res, nil
}

// withPopulation finds each model of the run in the population.
func (r *run) withPopulation(jobs []Job) error {
	if len(jobs) == 0 {
		return errors.New("simulate: strategy population: no population (a built-in workload's, Workload.Population)")
	}
	pop, err := newRun(jobs, Config{})
	if err != nil {
		return err
	}
	for m := range r.models {
		k := slices.IndexFunc(pop.models, func(md model) bool { return md.name == r.models[m].name })
		if k < 0 {
			return fmt.Errorf("simulate: strategy population: model %s has no population", r.models[m].name)
		}
		r.models[m].population = &pop.models[k]
	}
	return nil
}

// withFixedQuiet adds adaptive-fixed-quiet after adaptive when some job
// expects a webhook: what the learned webhook reliability saves.
func withFixedQuiet(strategies []Strategy, jobs []Job) []Strategy {
	ai := slices.IndexFunc(strategies, func(s Strategy) bool { return s.kind == adaptive })
	if ai < 0 || slices.ContainsFunc(strategies, func(s Strategy) bool { return s.kind == fixedQuiet }) ||
		!slices.ContainsFunc(jobs, func(j Job) bool { return j.Webhook }) {
		return strategies
	}
	return slices.Insert(slices.Clone(strategies), ai+1, Strategy{Name: FixedQuietName, kind: fixedQuiet})
}

// knob is a strategy's default setting.
func (c Config) knob(s Strategy) float64 {
	if s.kind == adaptive || s.kind == fixedQuiet || s.kind == optimal || s.kind == population {
		return c.Policy.PollCost.Seconds()
	}
	return 1
}

// run simulates and scores one strategy.
func (r *run) run(s Strategy, knobs []float64) []Score {
	return r.score(s, knobs, r.simulate(s, knobs))
}

// same is one knob for every model.
func (r *run) same(knob float64) []float64 {
	ks := make([]float64, len(r.models))
	for m := range ks {
		ks[m] = knob
	}
	return ks
}

// match bisects, for every model at once, adaptive's poll cost for the
// largest at which its mean and p95 delays are no worse than seed's.
func (r *run) match(s Strategy, seed []Score, frontiers []frontier) []Match {
	n := len(r.models)
	matches := make([]Match, n)
	lo, hi := r.same(math.Log(matchFrom)), r.same(math.Log(matchTo))
	settled := make([]bool, n) // the answer is known: lo fails or hi passes
	// try runs adaptive at exp(x[m]) and reports which models' delays are
	// no worse than seed-table's, keeping those scores.
	try := func(x []float64) []bool {
		knobs := make([]float64, n)
		for m := range x {
			knobs[m] = math.Exp(x[m])
		}
		ok := make([]bool, n)
		for m, sc := range r.run(s, knobs) {
			if settled[m] {
				continue
			}
			if ok[m] = sc.MeanDelayS <= seed[m].MeanDelayS && sc.P95DelayS <= seed[m].P95DelayS; ok[m] {
				frontiers[m].compare(&sc)
				matches[m].Adaptive = &sc
			}
		}
		return ok
	}
	for m, ok := range try(lo) {
		settled[m] = !ok
	}
	for m, ok := range try(hi) {
		settled[m] = settled[m] || ok
	}
	mid := make([]float64, n)
	for range matchSteps {
		for m := range mid {
			mid[m] = (lo[m] + hi[m]) / 2
		}
		for m, ok := range try(mid) {
			if ok {
				lo[m] = mid[m]
			} else {
				hi[m] = mid[m]
			}
		}
	}
	for m := range matches {
		matches[m].Model, matches[m].Seed = r.models[m].name, seed[m]
	}
	return matches
}

// parallel runs f(0) … f(n−1) on up to GOMAXPROCS goroutines.
func parallel(n int, f func(int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}
