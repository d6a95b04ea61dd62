package simulate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// Workload is a built-in synthetic workload of one model.
type Workload struct {
	// Name identifies the workload; it is also its model's name.
	Name string
	// About describes the distribution in a line.
	About string
	// run draws one job's run time (from start to terminal) and outcome,
	// given its index among n.
	run func(rnd *rand.Rand, i, n int) (float64, string)
	// queue draws one job's wait in the provider's queue; nil is the
	// shared lognormal wait (queueMedian, queueSigma).
	queue func(rnd *rand.Rand) float64
}

// Arrivals and queueing shared by the built-in workloads: jobs arrive as a
// Poisson process, a few dozen in flight at once, and wait in the
// provider's queue for a lognormal time first.
const (
	meanArrival = 2.0 // seconds between submissions
	queueMedian = 4.0 // seconds
	queueSigma  = 0.6
)

// lognormal draws from a lognormal distribution by median and sigma.
func lognormal(rnd *rand.Rand, median, sigma float64) float64 {
	return median * math.Exp(sigma*rnd.NormFloat64())
}

func succeeded(x float64) (float64, string) { return x, "succeeded" }

// Workloads returns the built-in workloads.
func Workloads() []Workload {
	ln := func(median, sigma float64) func(*rand.Rand, int, int) (float64, string) {
		return func(rnd *rand.Rand, _, _ int) (float64, string) { return succeeded(lognormal(rnd, median, sigma)) }
	}
	return []Workload{
		{"lognormal-0.25", "run time lognormal, median 90 s, σ 0.25 (a steady model)", ln(90, 0.25), nil},
		{"lognormal-0.5", "run time lognormal, median 90 s, σ 0.5", ln(90, 0.5), nil},
		{"lognormal-1", "run time lognormal, median 90 s, σ 1 (spread over a decade)", ln(90, 1), nil},
		{"bimodal", "60% lognormal median 30 s, 40% median 240 s, σ 0.2 (two resolutions under one model)",
			func(rnd *rand.Rand, _, _ int) (float64, string) {
				if rnd.Float64() < 0.6 {
					return succeeded(lognormal(rnd, 30, 0.2))
				}
				return succeeded(lognormal(rnd, 240, 0.2))
			}, nil},
		{"heavy-tail", "run time Pareto, minimum 30 s, α 1.5, cut at 30 min (median 48 s, p99 11 min)",
			func(rnd *rand.Rand, _, _ int) (float64, string) {
				return succeeded(min(30*math.Pow(1-rnd.Float64(), -1/1.5), 1800))
			}, nil},
		{"slowdown", "lognormal σ 0.35, median 60 s for the first half of the jobs, then 150 s",
			func(rnd *rand.Rand, i, n int) (float64, string) {
				if i < n/2 {
					return succeeded(lognormal(rnd, 60, 0.35))
				}
				return succeeded(lognormal(rnd, 150, 0.35))
			}, nil},
		{"early-failures", "20% fail a lognormal 6 s (σ 0.5) after they start; the rest run lognormal median 120 s, σ 0.3",
			func(rnd *rand.Rand, _, _ int) (float64, string) {
				if rnd.Float64() < 0.2 {
					return lognormal(rnd, 6, 0.5), "failed"
				}
				return succeeded(lognormal(rnd, 120, 0.3))
			}, nil},
		{"long-queue", "a queue wait exponential with mean 60 s, then run time lognormal median 180 s, σ 0.3; the provider reports queued, then running",
			ln(180, 0.3), func(rnd *rand.Rand) float64 { return rnd.ExpFloat64() * 60 }},
	}
}

// WorkloadNames lists the built-in workloads' names.
func WorkloadNames() []string {
	var names []string
	for _, w := range Workloads() {
		names = append(names, w.Name)
	}
	return names
}

// LookupWorkload returns the built-in workload of that name.
func LookupWorkload(name string) (Workload, error) {
	ws := Workloads()
	if i := slices.IndexFunc(ws, func(w Workload) bool { return w.Name == name }); i >= 0 {
		return ws[i], nil
	}
	return Workload{}, fmt.Errorf("unknown workload %q; built-in: %s", name, strings.Join(WorkloadNames(), ", "))
}

// Jobs draws n jobs of the workload, reproducibly from seed.
func (w Workload) Jobs(n int, seed uint64) []Job {
	rnd := rand.New(rand.NewPCG(seed, 0x5eed))
	jobs := make([]Job, n)
	t := 0.0
	for i := range jobs {
		t += rnd.ExpFloat64() * meanArrival
		var queue float64
		if w.queue != nil {
			queue = w.queue(rnd)
		} else {
			queue = lognormal(rnd, queueMedian, queueSigma)
		}
		run, outcome := w.run(rnd, i, n)
		jobs[i] = Job{Model: w.Name, Submit: t, Queue: queue, Duration: queue + run, Outcome: outcome}
	}
	return jobs
}
