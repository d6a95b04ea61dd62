package simulate

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWorkloads(t *testing.T) {
	t.Parallel()
	require.Len(t, WorkloadNames(), 19)
	medians := map[string]float64{ // of the total time, queue included
		"lognormal-0.25": 94, "lognormal-0.5": 94, "lognormal-1": 94,
		"bimodal": 45, "heavy-tail": 52, "slowdown": 100, "early-failures": 120, "long-queue": 235,
		"midrun-failures": 150, "speedup": 100,
		"progress": 124, "webhook-2%": 94, "webhook-10%": 94, "webhook-30%": 94, "long-queue-rejected": 270,
	}
	for _, w := range Workloads() {
		if len(w.parts) > 0 {
			continue // TestMixed
		}
		t.Run(w.Name, func(t *testing.T) {
			t.Parallel()
			jobs := w.Jobs(4000, 1)
			require.Equal(t, jobs, w.Jobs(4000, 1), "reproducible")
			require.NotEqual(t, jobs, w.Jobs(4000, 2), "seeded")
			var durations []float64
			for i, j := range jobs {
				require.Equal(t, w.Name, j.Model)
				require.Positive(t, j.Duration)
				require.LessOrEqual(t, j.Queue, j.Duration)
				if j.Queue == j.Duration {
					require.Equal(t, "failed", j.Outcome, "only a rejection never runs")
				}
				require.Contains(t, Outcomes, j.Outcome)
				if i > 0 {
					require.GreaterOrEqual(t, j.Submit, jobs[i-1].Submit, "in submit order")
				}
				durations = append(durations, j.Duration)
			}
			slices.Sort(durations)
			require.InEpsilon(t, medians[w.Name], durations[len(durations)/2], 0.15)
		})
	}
	_, err := LookupWorkload("nope")
	require.ErrorContains(t, err, `unknown workload "nope"`)
}

func TestEarlyFailuresAndSlowdown(t *testing.T) {
	t.Parallel()
	ef, _ := LookupWorkload("early-failures")
	failed := 0
	for _, j := range ef.Jobs(5000, 1) {
		if j.Outcome == "failed" {
			failed++
			require.Less(t, j.Duration-j.Queue, 60.0, "failures come early")
		}
	}
	require.InDelta(t, 1000, failed, 100)

	sd, _ := LookupWorkload("slowdown")
	jobs := sd.Jobs(4000, 1)
	mean := func(js []Job) float64 {
		s := 0.0
		for _, j := range js {
			s += j.Duration - j.Queue
		}
		return s / float64(len(js))
	}
	require.InEpsilon(t, 2.5, mean(jobs[2000:])/mean(jobs[:2000]), 0.1, "slower by 2.5× halfway")
}

// The mix interleaves six models, as many jobs each as asked for, each
// model's jobs those of its workload drawn alone at a sixth of the rate,
// under its own name.
func TestMixed(t *testing.T) {
	t.Parallel()
	w, err := LookupWorkload("mixed")
	require.NoError(t, err)
	jobs := w.Jobs(1000, 1)
	require.Len(t, jobs, 6000)
	require.Equal(t, jobs, w.Jobs(1000, 1), "reproducible")
	byModel := map[string][]Job{}
	switches := 0
	for i, j := range jobs {
		byModel[j.Model] = append(byModel[j.Model], j)
		if i > 0 {
			require.GreaterOrEqual(t, j.Submit, jobs[i-1].Submit, "in submit order")
			if j.Model != jobs[i-1].Model {
				switches++
			}
		}
	}
	require.Len(t, byModel, 6)
	require.InDelta(t, 5.0/6, float64(switches)/float64(len(jobs)), 0.02, "interleaved, not in runs of one model")
	for k, part := range w.parts {
		own := byModel["mixed/"+part.Name]
		require.Len(t, own, 1000, part.Name)
		alone := part.jobs(len(own), 1, uint64(k+1), meanArrival*6, "mixed/"+part.Name)
		require.Equal(t, alone, own, "%s: its own jobs, as if alone", part.Name)
		require.InEpsilon(t, meanArrival*6, own[len(own)-1].Submit/float64(len(own)), 0.1, "%s: a sixth of the rate", part.Name)
	}
	var late float64 // slowdown's: by its own jobs' index, not the mix's
	slow := byModel["mixed/slowdown"]
	for _, j := range slow[len(slow)/2:] {
		late += j.Duration - j.Queue
	}
	require.Greater(t, late/float64(len(slow)-len(slow)/2), 120.0)
}

// A workload with rejections fails 5% of its jobs 1.5–8 s after
// submission, reported running from their acceptance; the studio mix
// draws 600 jobs of each of its six models whatever it is asked for,
// one every 4 s a model, each with its rejections.
func TestRejectedAndStudio(t *testing.T) {
	t.Parallel()
	w, err := LookupWorkload("long-queue-rejected")
	require.NoError(t, err)
	rejected := 0
	for _, j := range w.Jobs(4000, 1) {
		if j.Outcome == "failed" {
			rejected++
			require.Zero(t, j.Queue)
			require.GreaterOrEqual(t, j.Duration, rejectFrom)
			require.LessOrEqual(t, j.Duration, rejectTo)
		}
	}
	require.InDelta(t, 200, rejected, 40)

	studio, err := LookupWorkload("studio")
	require.NoError(t, err)
	jobs := studio.Jobs(50, 1)
	require.Len(t, jobs, 6*studioJobs)
	byModel := groupByModel(jobs)
	require.Len(t, byModel, 6)
	for name, own := range byModel {
		require.Len(t, own, studioJobs, name)
		require.InEpsilon(t, 4, own[len(own)-1].Submit/float64(len(own)), 0.15, name)
		failed := 0
		for _, j := range own {
			if j.Outcome == "failed" {
				failed++
			}
		}
		require.InDelta(t, 30, failed, 15, name)
	}
}

// The progress workload's provider reports a running job's completed
// share in 5% steps, near its elapsed share of the run time, never 100%;
// a trace's jobs report none.
func TestProgressReported(t *testing.T) {
	t.Parallel()
	w, _ := LookupWorkload("progress")
	for i, j := range w.Jobs(100, 1) {
		require.Equal(t, 0.05, j.ProgressStep)
		run := j.Duration - j.Queue
		for k := range 50 {
			now := j.Submit + j.Queue + run*float64(k)/50
			f := j.progressAt(i, now)
			require.Equal(t, f, j.progressAt(i, now), "a function of the job and the instant")
			share := float64(k) / 50
			require.GreaterOrEqual(t, f, 0.0)
			require.LessOrEqual(t, f, 0.95+1e-12)
			require.InDelta(t, 0, math.Remainder(f, 0.05), 1e-9, "in steps")
			require.Greater(t, f, share-progressNoise-0.05-1e-9)
			require.Less(t, f, share+progressNoise+1e-9)
		}
	}
	plain := Job{Submit: 0, Queue: 1, Duration: 10}
	require.Zero(t, plain.progressAt(0, 5))
}

// midrun-failures fails 4% of its jobs at a uniform point of their run,
// after the queue: their run until the failure spreads from seconds to
// minutes, its mean half the succeeded jobs'. speedup is slowdown the
// other way: 2.5× faster from halfway.
func TestMidRunFailuresAndSpeedup(t *testing.T) {
	t.Parallel()
	w, err := LookupWorkload("midrun-failures")
	require.NoError(t, err)
	var failedRun, okRun []float64
	for _, j := range w.Jobs(10000, 1) {
		require.Less(t, j.Queue, j.Duration, "every job runs")
		if j.Outcome == "failed" {
			failedRun = append(failedRun, j.Duration-j.Queue)
		} else {
			okRun = append(okRun, j.Duration-j.Queue)
		}
	}
	require.InDelta(t, 400, len(failedRun), 60)
	slices.Sort(failedRun)
	require.Less(t, failedRun[len(failedRun)/10], 30.0, "some fail early in the run")
	require.Greater(t, failedRun[len(failedRun)*9/10], 120.0, "some minutes into it")
	mean := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	require.InEpsilon(t, 0.5, mean(failedRun)/mean(okRun), 0.1, "a uniform point of the run")

	sp, err := LookupWorkload("speedup")
	require.NoError(t, err)
	jobs := sp.Jobs(4000, 1)
	runs := func(js []Job) []float64 {
		var xs []float64
		for _, j := range js {
			xs = append(xs, j.Duration-j.Queue)
		}
		return xs
	}
	require.InEpsilon(t, 2.5, mean(runs(jobs[:2000]))/mean(runs(jobs[2000:])), 0.1, "faster by 2.5× halfway")
}

// fleet draws 600 jobs of each of its six models whatever it is asked
// for, fleet-250 the same models 250 times each: each with its early
// rejections, flaky and oom with their failures in the middle of a run,
// long-queue with its queue.
func TestFleet(t *testing.T) {
	t.Parallel()
	for name, per := range map[string]int{"fleet": studioJobs, "fleet-250": fewJobs} {
		w, err := LookupWorkload(name)
		require.NoError(t, err)
		jobs := w.Jobs(50, 1)
		require.Len(t, jobs, 6*per, name)
		byModel := groupByModel(jobs)
		require.Len(t, byModel, 6)
		for model, own := range byModel {
			require.Len(t, own, per, model)
			rejected, midRun := 0, 0
			for _, j := range own {
				switch {
				case j.Outcome == "failed" && j.Queue == 0 && j.Duration <= rejectTo:
					rejected++
				case j.Outcome == "failed":
					midRun++
				}
			}
			require.InDelta(t, 0.05*float64(per), rejected, 0.04*float64(per), model)
			if !strings.HasSuffix(model, "/flaky") && !strings.HasSuffix(model, "/oom") {
				require.Zero(t, midRun, model)
			}
		}
	}
	w, _ := LookupWorkload("fleet")
	byModel := groupByModel(w.Jobs(0, 2))
	failed := func(js []Job) int {
		n := 0
		for _, j := range js {
			if j.Outcome == "failed" && j.Queue > 0 {
				n++
			}
		}
		return n
	}
	require.InDelta(t, 0.06*studioJobs*0.95, failed(byModel["fleet/flaky"]), 15)
	require.InDelta(t, 0.02*studioJobs*0.95, failed(byModel["fleet/oom"]), 8)
	queued := 0.0
	for _, j := range byModel["fleet/long-queue"] {
		queued += j.Queue
	}
	require.InEpsilon(t, 120*0.95, queued/studioJobs, 0.15)
}

// groupByModel returns the jobs of each model, in order.
func groupByModel(jobs []Job) map[string][]Job {
	byModel := map[string][]Job{}
	for _, j := range jobs {
		byModel[j.Model] = append(byModel[j.Model], j)
	}
	return byModel
}

// A workload's population draws as many jobs of each of its models as
// asked, a mix's whatever it fixes, none of them the run's.
func TestPopulationDraws(t *testing.T) {
	t.Parallel()
	w, _ := LookupWorkload("fleet")
	pop := w.Population(1000, 1)
	require.Len(t, pop, 6*1000)
	require.Equal(t, pop, w.Population(1000, 1), "reproducible")
	run := w.Jobs(0, 1)
	byModel := groupByModel(pop)
	for model, own := range groupByModel(run) {
		require.Len(t, byModel[model], 1000, model)
		require.NotEqual(t, own[0].Duration, byModel[model][0].Duration, model)
	}
	single, _ := LookupWorkload("slowdown")
	jobs := single.Population(2000, 1)
	require.Len(t, jobs, 2000)
	require.NotEqual(t, single.Jobs(2000, 1), jobs)
}
