package schedule_test

import (
	"testing"
	"time"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

func BenchmarkNext(b *testing.B) {
	p := schedule.Policy{}
	midRun := learned(60, 0.8, 80, 13) // failures from seconds to minutes into the run
	jobs := map[string]schedule.Job{
		"cold":    {Now: t0.Add(40 * time.Second), Submitted: t0, Polls: 3, Unchanged: 1, Expected: 90 * time.Second},
		"learned": {Now: t0.Add(40 * time.Second), Submitted: t0, Polls: 3, Learned: total},
		"learned-run": {Now: t0.Add(40 * time.Second), Submitted: t0, Polls: 3, Phase: schedule.PhaseRunning,
			Learned: total, LearnedRun: run, StartedAt: t0.Add(5 * time.Second)},
		"progress": {Now: t0.Add(40 * time.Second), Submitted: t0, Polls: 3, Phase: schedule.PhaseRunning,
			Learned: total, LearnedRun: run, StartedAt: t0.Add(5 * time.Second), Progress: 0.4},
		"failures-mid-run": {Now: t0.Add(40 * time.Second), Submitted: t0, Polls: 3, Phase: schedule.PhaseRunning,
			Learned: total, LearnedRun: run, StartedAt: t0.Add(5 * time.Second), LearnedFailed: midRun, FailedShare: 0.05},
	}
	for _, name := range []string{"cold", "learned", "learned-run", "progress", "failures-mid-run"} {
		j := jobs[name]
		r := rnd()
		p.Next(j, r) // warm the plan cache
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Next(j, r)
			}
		})
	}
}

// BenchmarkNextProgressFleet decides for a fleet of running jobs
// reporting progress in 1, 5 or 10 % steps at random points of their runs,
// one after another: the amortized cost of a progress decision, cache
// misses included.
func BenchmarkNextProgressFleet(b *testing.B) {
	p := schedule.Policy{}
	jobs := progressJobs(4096, 21)
	r := rnd()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p.Next(jobs[i%len(jobs)], r)
	}
}

func BenchmarkObserve(b *testing.B) {
	d := *learned(90, 0.5, 200, 1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		d.Observe(time.Duration(60+i%60) * time.Second)
	}
}
