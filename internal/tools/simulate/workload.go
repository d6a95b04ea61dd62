package simulate

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// Workload is a built-in synthetic workload: one model, or a mix of
// several.
type Workload struct {
	// Name identifies the workload; it is also its model's name (a mix's
	// models are named Name/part).
	Name string
	// About describes the distribution in a line.
	About string
	// run draws one job's run time (from start to terminal) and outcome,
	// given its index among n.
	run func(rnd *rand.Rand, i, n int) (float64, string)
	// queue draws one job's wait in the provider's queue; nil is the
	// shared lognormal wait (queueMedian, queueSigma).
	queue func(rnd *rand.Rand) float64
	// parts, for a mix, are the workloads whose jobs it interleaves: each
	// gets an equal share of the jobs, arriving as its own Poisson
	// process, so the mix arrives at a single workload's rate.
	parts []Workload
	// progress is the step of the completed share the provider reports
	// while a job runs (Job.ProgressStep); 0 reports none.
	progress float64
	// webhook, when above 0, is the chance a job's webhook is lost: every
	// job expects one, which comes a lognormal lateness after its end
	// otherwise. 0 is no webhooks.
	webhook float64
	// rejected is the share of jobs the provider rejects early (a
	// validation or safety check), uniformly rejectFrom–rejectTo seconds
	// after submission; 0 is none. A rejected job is reported running
	// from its acceptance (the provider validates it as it runs it; a
	// trace of a job whose start was never reported reads the same).
	rejected float64
	// perModel, for a mix, fixes how many jobs each part draws whatever
	// Jobs is asked for (a fleet's first days with a model, not a
	// benchmark); 0 is Jobs' n.
	perModel int
	// gap, for a mix, is each part's mean time between submissions in
	// seconds; 0 is meanArrival times the number of parts.
	gap float64
}

// Early rejections (Workload.rejected) come this long after submission,
// uniformly.
const rejectFrom, rejectTo = 1.5, 8.0

// studioJobs is how many jobs each model of the studio mix draws: a few
// hundred, as a fleet sees a model in its first days.
const studioJobs = 600

// fewJobs is how many jobs each model of fleet-250 draws.
const fewJobs = 250

// midRun makes a share of a run's jobs fail at a uniform point of their
// run time, as a provider failing a job minutes into it does (a safety
// check on the output, out of memory, a worker lost).
func midRun(run func(*rand.Rand, int, int) (float64, string), share float64) func(*rand.Rand, int, int) (float64, string) {
	return func(rnd *rand.Rand, i, n int) (float64, string) {
		x, outcome := run(rnd, i, n)
		if rnd.Float64() < share {
			return x * rnd.Float64(), "failed"
		}
		return x, outcome
	}
}

// halfway is a lognormal run time of median before for the first half of
// the jobs and after for the rest.
func halfway(before, after, sigma float64) func(*rand.Rand, int, int) (float64, string) {
	return func(rnd *rand.Rand, i, n int) (float64, string) {
		if i < n/2 {
			return succeeded(lognormal(rnd, before, sigma))
		}
		return succeeded(lognormal(rnd, after, sigma))
	}
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
	ws := []Workload{
		{Name: "lognormal-0.25", About: "run time lognormal, median 90 s, σ 0.25 (a steady model)", run: ln(90, 0.25)},
		{Name: "lognormal-0.5", About: "run time lognormal, median 90 s, σ 0.5", run: ln(90, 0.5)},
		{Name: "lognormal-1", About: "run time lognormal, median 90 s, σ 1 (spread over a decade)", run: ln(90, 1)},
		{Name: "bimodal", About: "60% lognormal median 30 s, 40% median 240 s, σ 0.2 (two resolutions under one model)",
			run: func(rnd *rand.Rand, _, _ int) (float64, string) {
				if rnd.Float64() < 0.6 {
					return succeeded(lognormal(rnd, 30, 0.2))
				}
				return succeeded(lognormal(rnd, 240, 0.2))
			}},
		{Name: "heavy-tail", About: "run time Pareto, minimum 30 s, α 1.5, cut at 30 min (median 48 s, p99 11 min)",
			run: func(rnd *rand.Rand, _, _ int) (float64, string) {
				return succeeded(min(30*math.Pow(1-rnd.Float64(), -1/1.5), 1800))
			}},
		{Name: "slowdown", About: "lognormal σ 0.35, median 60 s for the first half of the jobs, then 150 s", run: halfway(60, 150, 0.35)},
		{Name: "early-failures", About: "20% fail a lognormal 6 s (σ 0.5) after they start; the rest run lognormal median 120 s, σ 0.3",
			run: func(rnd *rand.Rand, _, _ int) (float64, string) {
				if rnd.Float64() < 0.2 {
					return lognormal(rnd, 6, 0.5), "failed"
				}
				return succeeded(lognormal(rnd, 120, 0.3))
			}},
		{Name: "long-queue", About: "a queue wait exponential with mean 60 s, then run time lognormal median 180 s, σ 0.3; the provider reports queued, then running",
			run: ln(180, 0.3), queue: func(rnd *rand.Rand) float64 { return rnd.ExpFloat64() * 60 }},
	}
	ws = append(ws,
		Workload{Name: "midrun-failures", run: midRun(ln(150, 0.4), 0.04),
			About: "run time lognormal, median 150 s, σ 0.4; 4% fail at a uniform point of their run (a safety check on the output, out of memory, a worker lost)"},
		Workload{Name: "speedup", run: halfway(150, 60, 0.35),
			About: "lognormal σ 0.35, median 150 s for the first half of the jobs, then 60 s (slowdown the other way)"})
	ws = append(ws, Workload{Name: "progress", About: "run time lognormal, median 120 s, σ 0.5; the provider reports progress while running, in 5% steps, the share of the run time elapsed ±3%",
		run: ln(120, 0.5), progress: 0.05})
	for _, miss := range []float64{0.02, 0.1, 0.3} {
		pct := strconv.FormatFloat(100*miss, 'g', -1, 64) + "%"
		ws = append(ws, Workload{Name: "webhook-" + pct,
			About: "lognormal-0.5's jobs, each expecting a webhook: lost for " + pct + " of them, else coming a lognormal 1 s (σ 1) after the job ends",
			run:   ln(90, 0.5), webhook: miss})
	}
	find := func(name string) Workload {
		return ws[slices.IndexFunc(ws, func(w Workload) bool { return w.Name == name })]
	}
	// fast is an image model: seconds of run time after the shared queue
	// wait. It runs only in the mix.
	fast := Workload{Name: "fast", About: "run time lognormal, median 20 s, σ 0.3", run: ln(20, 0.3)}
	// The models of a studio's day, each with 5% of its jobs rejected
	// early: the workloads an outside measurement of Pollux used (issue
	// 33), on which it planned a long model's rejections badly.
	expQueue := func(mean float64) func(*rand.Rand) float64 {
		return func(rnd *rand.Rand) float64 { return rnd.ExpFloat64() * mean }
	}
	longRejected := Workload{Name: "long-queue-rejected", rejected: 0.05, run: ln(210, 0.5), queue: expQueue(60),
		About: "a queue wait exponential with mean 60 s, then run time lognormal median 210 s, σ 0.5, the provider reporting queued, then running; 5% rejected 1.5–8 s after submission"}
	studio := []Workload{
		{Name: "preview", run: ln(32, 0.3), queue: expQueue(3), rejected: 0.05},
		{Name: "long-queue", run: ln(210, 0.5), queue: expQueue(60), rejected: 0.05},
		{Name: "standard", run: ln(100, 0.35), queue: expQueue(8), rejected: 0.05},
		{Name: "bimodal", rejected: 0.05, run: func(rnd *rand.Rand, _, _ int) (float64, string) {
			if rnd.Float64() < 0.6 {
				return succeeded(lognormal(rnd, 25, 0.2))
			}
			return succeeded(lognormal(rnd, 140, 0.2))
		}},
		{Name: "new-model", run: ln(80, 1.1), rejected: 0.05},
		{Name: "slowdown", rejected: 0.05, run: halfway(60, 108, 0.35)},
	}
	// The models of a fleet's week where the studio leaves off (issue 42):
	// run times spread over a decade, failures minutes into a run, a long
	// queue reported, a provider that speeds up; each with 5% of its jobs
	// rejected early, as the studio's.
	fleet := []Workload{
		{Name: "varied", run: ln(40, 0.9), queue: expQueue(5), rejected: 0.05},
		{Name: "new-model", run: ln(150, 1.1), rejected: 0.05},
		{Name: "flaky", run: midRun(ln(90, 0.4), 0.06), rejected: 0.05},
		{Name: "oom", run: midRun(ln(240, 0.35), 0.02), queue: expQueue(10), rejected: 0.05},
		{Name: "long-queue", run: ln(150, 0.4), queue: expQueue(120), rejected: 0.05},
		{Name: "speedup", run: halfway(150, 60, 0.35), rejected: 0.05},
	}
	const fleetAbout = "six models, 5% of every model's jobs rejected 1.5–8 s after submission, a submission every 4 s a model: " +
		"varied (queue exponential 5 s, run lognormal 40 s, σ 0.9), new-model (run 150 s, σ 1.1), " +
		"flaky (run 90 s, σ 0.4, 6% failing at a uniform point of the run), oom (queue 10 s, run 240 s, σ 0.35, 2% failing so), " +
		"long-queue (queue exponential 120 s, run 150 s, σ 0.4, queued then running reported), speedup (150 s, σ 0.35, 2.5× faster from halfway)"
	ws = append(ws, longRejected, Workload{
		Name:  "mixed",
		About: "six models in one run, as many jobs each as alone, interleaved, each learned and scored on its own: fast (run time lognormal median 20 s, σ 0.3), long-queue, bimodal, heavy-tail, slowdown, early-failures",
		parts: []Workload{fast, find("long-queue"), find("bimodal"), find("heavy-tail"), find("slowdown"), find("early-failures")},
	}, Workload{
		Name: "studio",
		About: "a studio's day: six models, 600 jobs each whatever --jobs says, a submission every 4 s a model, 5% of every model's jobs rejected 1.5–8 s after submission: " +
			"preview (queue exponential 3 s, run lognormal 32 s, σ 0.3), long-queue (as long-queue-rejected), standard (queue 8 s, run 100 s, σ 0.35), " +
			"bimodal (60% around 25 s, 40% around 140 s), new-model (run 80 s, σ 1.1), slowdown (60 s, σ 0.35, 1.8× slower from halfway)",
		parts: studio, perModel: studioJobs, gap: 4,
	}, Workload{
		Name: "fleet", About: "a fleet's week: " + strconv.Itoa(studioJobs) + " jobs a model whatever --jobs says; " + fleetAbout,
		parts: fleet, perModel: studioJobs, gap: 4,
	}, Workload{
		Name: "fleet-250", About: "fleet's models seen " + strconv.Itoa(fewJobs) + " times each, as a fleet of many models sees some of them in a week",
		parts: fleet, perModel: fewJobs, gap: 4,
	})
	return ws
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

// Jobs draws n jobs of the workload, reproducibly from seed. A mix draws
// n jobs of each of its parts — each model as many as it has alone, so
// that its scores are measured on as many jobs — each part's arriving as
// its own Poisson process at 1/parts of the rate, and returns them in
// submit order.
func (w Workload) Jobs(n int, seed uint64) []Job {
	if len(w.parts) == 0 {
		return w.jobs(n, seed, 0, meanArrival, w.Name)
	}
	k := len(w.parts)
	n = cmp.Or(w.perModel, n)
	gap := cmp.Or(w.gap, meanArrival*float64(k))
	var jobs []Job
	for i, part := range w.parts {
		// Each part its own stream: no two parts arrive in step.
		jobs = append(jobs, part.jobs(n, seed, uint64(i+1), gap, w.Name+"/"+part.Name)...)
	}
	slices.SortStableFunc(jobs, func(a, b Job) int { return cmp.Compare(a.Submit, b.Submit) })
	return jobs
}

// PopulationJobs is how many jobs of each model a built-in workload's
// population holds (Workload.Population).
const PopulationJobs = 100_000

// populationStream sets a population's random streams apart from any
// run's.
const populationStream = 1 << 32

// Population draws n jobs of each of the workload's models — of a mix, n
// of each part, whatever it fixes — from random streams the run's jobs
// (Jobs) never draw from: each model's population, which the strategy
// population plans (Config.Population). They are not in submit order.
func (w Workload) Population(n int, seed uint64) []Job {
	if len(w.parts) == 0 {
		return w.jobs(n, seed, populationStream, meanArrival, w.Name)
	}
	var jobs []Job
	for i, part := range w.parts {
		jobs = append(jobs, part.jobs(n, seed, populationStream+uint64(i+1), meanArrival, w.Name+"/"+part.Name)...)
	}
	return jobs
}

// jobs draws n jobs of a single workload as model from the random stream
// of seed, arriving meanGap seconds apart on average.
func (w Workload) jobs(n int, seed, stream uint64, meanGap float64, model string) []Job {
	rnd := rand.New(rand.NewPCG(seed, 0x5eed+stream))
	jobs := make([]Job, n)
	t := 0.0
	for i := range jobs {
		t += rnd.ExpFloat64() * meanGap
		var queue float64
		if w.queue != nil {
			queue = w.queue(rnd)
		} else {
			queue = lognormal(rnd, queueMedian, queueSigma)
		}
		run, outcome := w.run(rnd, i, n)
		if w.rejected > 0 && rnd.Float64() < w.rejected {
			queue, run, outcome = 0, rejectFrom+(rejectTo-rejectFrom)*rnd.Float64(), "failed"
		}
		jobs[i] = Job{Model: model, Submit: t, Queue: queue, Duration: queue + run, Outcome: outcome, ProgressStep: w.progress}
	}
	if w.webhook > 0 {
		// A stream of their own: the same jobs at every miss chance, the
		// webhooks lost at a lower chance lost at a higher one too.
		wr := rand.New(rand.NewPCG(seed, 0x3eb+stream))
		for i := range jobs {
			jobs[i].Webhook = true
			jobs[i].WebhookLost = wr.Float64() < w.webhook
			jobs[i].WebhookLate = lognormal(wr, webhookLateMedian, webhookLateSigma)
		}
	}
	return jobs
}
