package schedule_test

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

// secs converts seconds to a duration.
func secs(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }

// lognormal draws durations with the given median (seconds) and sigma.
func lognormal(r *rand.Rand, median, sigma float64) time.Duration {
	return secs(median * math.Exp(sigma*r.NormFloat64()))
}

// learned is a Dist that observed n lognormal durations.
func learned(median, sigma float64, n int, seed uint64) *schedule.Dist {
	r := rand.New(rand.NewPCG(seed, 1))
	var d schedule.Dist
	for range n {
		d.Observe(lognormal(r, median, sigma))
	}
	return &d
}

// lognormalSurvival is P(T > t) of a lognormal distribution.
func lognormalSurvival(median, sigma float64) func(time.Duration) float64 {
	return func(t time.Duration) float64 {
		if t <= 0 {
			return 1
		}
		return 0.5 * math.Erfc(math.Log(t.Seconds()/median)/(sigma*math.Sqrt2))
	}
}

// progressJobs draws n running jobs of the run distribution run (lognormal
// 80 s, σ 0.3), each at a random point of its run, reporting its elapsed
// share rounded down to a step of 1, 5 or 10 %.
func progressJobs(n int, seed uint64) []schedule.Job {
	r := rand.New(rand.NewPCG(seed, 3))
	steps := []float64{0.01, 0.05, 0.1}
	jobs := make([]schedule.Job, n)
	for i := range jobs {
		T := lognormal(r, 80, 0.3)
		ran := time.Duration(r.Float64() * float64(T))
		step := steps[r.IntN(len(steps))]
		f := math.Floor(ran.Seconds()/T.Seconds()/step) * step
		jobs[i] = schedule.Job{Now: t0.Add(5*time.Second + ran), Submitted: t0, Polls: 3, Phase: schedule.PhaseRunning,
			Learned: total, LearnedRun: run, StartedAt: t0.Add(5 * time.Second), Progress: f}
	}
	return jobs
}
