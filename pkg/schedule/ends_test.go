package schedule_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

// rejectedModel is a long model with early rejections, learned as the
// fleet learns it: a queue wait exponential with mean 60 s, a run
// lognormal 210 s (σ 0.5), and 5 % of the jobs rejected uniformly 1.5–8 s
// after acceptance. It returns the run times of the succeeded jobs, the
// rejections' times, their share, every job's time from acceptance (the
// mixture) and its true P(T > t).
func rejectedModel(seed uint64) (run, failed *schedule.Dist, share float64, total *schedule.Dist, survival func(time.Duration) float64) {
	r := rand.New(rand.NewPCG(seed, 7))
	var ok schedule.Dist
	run, failed = &schedule.Dist{}, &schedule.Dist{}
	var ends []float64
	for range 4000 {
		if r.Float64() < 0.05 {
			x := 1.5 + 6.5*r.Float64()
			failed.Observe(secs(x))
			ends = append(ends, x)
			continue
		}
		q, x := r.ExpFloat64()*60, lognormal(r, 210, 0.5)
		run.Observe(x)
		ok.Observe(secs(q) + x)
		ends = append(ends, q+x.Seconds())
	}
	slices.Sort(ends)
	survival = func(t time.Duration) float64 {
		i, _ := slices.BinarySearch(ends, t.Seconds())
		return float64(len(ends)-i) / float64(len(ends))
	}
	return run, failed, 0.05, ok.Mixed(failed, 0.05), survival
}

// A long model's plan pays for its rejections only while they are still
// likely: a queued job polls within the rejections' window as often as
// the optimum of every job's end does — once — and, past it, as if it
// had just started; a running one as its run's plan says. Without the
// failure part (LearnedFailed), the queued job waits the run's first gap
// and finds a rejection up to a minute late.
func TestRejectionsArePlannedWhileLikely(t *testing.T) {
	t.Parallel()
	run, failed, share, total, survival := rejectedModel(1)
	p := schedule.Policy{Jitter: 1e-9}
	polls := func(sj schedule.Job, within time.Duration) []time.Duration {
		rnd := rand.New(rand.NewPCG(1, 2))
		var at []time.Duration
		var t time.Duration
		for i := 0; ; i++ {
			sj.Now, sj.Polls = t0.Add(t), i
			if i > 0 {
				sj.Phase = schedule.PhaseQueued // the queue is a minute long
			}
			t += p.Next(sj, rnd)
			if t > within {
				return at
			}
			at = append(at, t)
		}
	}
	job := schedule.Job{Submitted: t0, Learned: total, LearnedRun: run, LearnedFailed: failed, FailedShare: share}

	opt := p.PlanSurvival(survival, 30*time.Minute).Times(3)
	optEarly := 0
	for _, x := range opt {
		if x <= 15*time.Second {
			optEarly++
		}
	}
	require.Equal(t, 1, optEarly, "the optimum polls once in the rejections' window: %v", opt)
	got := polls(job, 15*time.Second)
	require.Len(t, got, optEarly, "no more polls in the first seconds than the optimum: %v", got)
	require.InDelta(t, 9, got[0].Seconds(), 3, "near the end of the window, catching most rejections")

	// Queued past the window: the failure part no longer weighs.
	past := job
	past.Now, past.Phase, past.Polls = t0.Add(15*time.Second), schedule.PhaseQueued, 2
	require.InDelta(t, p.Plan(run).Delay(0).Seconds(), p.Next(past, rand.New(rand.NewPCG(1, 2))).Seconds(), 1e-3)

	// Queued within it: the next poll comes before the window closes.
	within := job
	within.Now, within.Phase, within.Polls = t0.Add(3*time.Second), schedule.PhaseQueued, 1
	first := p.Plan(run).Delay(0)
	require.Greater(t, first, 50*time.Second, "the run's plan waits nearly the longest gap")
	d := p.Next(within, rand.New(rand.NewPCG(1, 2)))
	require.Less(t, d, first/2, "a rejection is still likely")

	// The rule: without the failure part, the queued job waits the run's
	// first gap and a rejection is found up to a minute late.
	within.LearnedFailed, within.FailedShare = nil, 0
	require.InDelta(t, first.Seconds(), p.Next(within, rand.New(rand.NewPCG(1, 2))).Seconds(), 1e-3)
}

// The mixture of the succeeded jobs and the failures weighs each by the
// share, whatever their histograms' weights: 3 rejections among 70 jobs
// and 30 among 700 are the same 5 %.
func TestMixedWeighsByTheShare(t *testing.T) {
	t.Parallel()
	ok, bad := learned(200, 0.3, 500, 1), learned(4, 0.2, 3, 2)
	m := ok.Mixed(bad, 0.05)
	require.InDelta(t, 0.95, m.Survival(20*time.Second), 0.005)
	require.InDelta(t, ok.Weight()+bad.Weight(), m.Weight(), 1e-9)
	require.Same(t, ok, ok.Mixed(bad, 0))
	require.Same(t, ok, ok.Mixed(nil, 0.05))
	require.Same(t, bad, (&schedule.Dist{}).Mixed(bad, 0.05))
	require.NotEqual(t, ok.ID(), m.ID())
	require.Equal(t, m.ID(), ok.Mixed(bad, 0.05).ID(), "the same contents, the same identity")
	require.False(t, math.IsNaN(m.Survival(time.Second)))
}
