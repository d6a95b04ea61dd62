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

// replayProgress polls n jobs whose run times are lognormal 80 s, σ 0.3
// (run's distribution), each from its start to its end, every poll
// reporting its elapsed share give or take 3 %, rounded down to step (never
// 100 % while it runs, as providers report). The policy knows the start
// and the run times (Learned and LearnedRun) when withRun, else only
// Learned: the same distribution, so only the progress rule differs. It
// returns the polls a job and the mean detection delay.
func replayProgress(p schedule.Policy, step float64, withRun bool, n int, seed uint64) (polls, delay float64) {
	r := rand.New(rand.NewPCG(seed, 5))
	jr := rand.New(rand.NewPCG(seed, 6))
	for range n {
		T := lognormal(r, 80, 0.3)
		var at time.Duration
		f := 0.0
		for k := 0; ; k++ {
			j := schedule.Job{Now: t0.Add(at), Submitted: t0, StartedAt: t0, Phase: schedule.PhaseRunning,
				Polls: k, Learned: run, Progress: f}
			if withRun {
				j.LearnedRun = run
			}
			at += p.Next(j, jr)
			polls++
			if at >= T {
				delay += (at - T).Seconds()
				break
			}
			share := at.Seconds()/T.Seconds() + 0.03*(2*r.Float64()-1)
			f = min(max(math.Floor(share/step+1e-9)*step, 0), 1-step)
		}
	}
	return polls / float64(n), delay / float64(n)
}

// The learned run times restricted to those consistent with the reported
// progress beat the estimate r·(1−f)/f ± 25 % they replace where the
// provider reports in coarse steps (5, 10, 20 %; the policy is not told
// which): fewer polls plus delay/PollCost.
func TestProgressBeatsTheEstimate(t *testing.T) {
	t.Parallel()
	p := schedule.Policy{}
	cost := p.WithDefaults().PollCost.Seconds()
	for _, tc := range []struct {
		step float64
		gain float64 // the least share of the estimate's cost saved
	}{{0.05, 0.03}, {0.1, 0.1}, {0.2, 0.08}} {
		oldPolls, oldDelay := replayProgress(p, tc.step, false, 4000, 1)
		newPolls, newDelay := replayProgress(p, tc.step, true, 4000, 1)
		oldCost, newCost := oldPolls+oldDelay/cost, newPolls+newDelay/cost
		t.Logf("step %g: estimate %.2f polls %.1f s (cost %.2f), distribution %.2f polls %.1f s (cost %.2f)",
			tc.step, oldPolls, oldDelay, oldCost, newPolls, newDelay, newCost)
		require.Less(t, newCost, (1-tc.gain)*oldCost, "step %g", tc.step)
	}
	// In fine steps (1 %, or exact shares) the error of the share, not
	// the step, bounds what a report says, and the estimate does about as
	// well (within 5 %).
	for _, step := range []float64{0.01, 1e-4} {
		oldPolls, oldDelay := replayProgress(p, step, false, 4000, 2)
		newPolls, newDelay := replayProgress(p, step, true, 4000, 2)
		oldCost, newCost := oldPolls+oldDelay/cost, newPolls+newDelay/cost
		t.Logf("step %g: estimate cost %.2f, distribution %.2f", step, oldCost, newCost)
		require.Less(t, newCost, 1.05*oldCost, "step %g", step)
	}
}

// Without a learned run distribution, a start, or a share in (0, 1), or
// with an ETA, progress keeps the estimate r·(1−f)/f of the time left.
func TestProgressFallsBackToTheEstimate(t *testing.T) {
	t.Parallel()
	p := schedule.Policy{}.WithDefaults()
	jittered := func(d time.Duration) [2]time.Duration { return [2]time.Duration{d * 8 / 10, d * 12 / 10} }
	now := t0.Add(40 * time.Second)
	start := t0.Add(10 * time.Second)
	// Every run took 10 s: no run is consistent with 50 % after 30 s.
	var short schedule.Dist
	for range 100 {
		short.Observe(10 * time.Second)
	}
	for _, tc := range []struct {
		name  string
		job   schedule.Job
		delay [2]time.Duration
	}{
		{"cold start: run times not learned",
			schedule.Job{Progress: 0.5, StartedAt: start, LearnedRun: young},
			jittered(around(30*time.Second, p.PollCost))},
		{"no start: the estimate from the submission",
			schedule.Job{Progress: 0.5, LearnedRun: run},
			jittered(around(40*time.Second, p.PollCost))},
		{"no run consistent with the report",
			schedule.Job{Progress: 0.5, StartedAt: start, LearnedRun: &short},
			jittered(around(30*time.Second, p.PollCost))},
		{"complete: the estimate's MinDelay",
			schedule.Job{Progress: 1, StartedAt: start, LearnedRun: run},
			[2]time.Duration{time.Second, time.Second * 12 / 10}},
		{"past complete",
			schedule.Job{Progress: 1.5, StartedAt: start, LearnedRun: run},
			[2]time.Duration{time.Second, time.Second * 12 / 10}},
		{"an ETA comes first",
			schedule.Job{Progress: 0.5, ETA: 20 * time.Second, StartedAt: start, LearnedRun: run},
			jittered(around(20*time.Second, p.PollCost))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := tc.job
			j.Now, j.Submitted, j.Phase, j.Polls = now, t0, schedule.PhaseRunning, 3
			within(t, p, j, tc.delay[0], tc.delay[1])
		})
	}
}

// With learned run times, the next poll of a job reporting progress falls
// where the runs consistent with the report end: not before the earliest
// of them nor past the latest (but for the ±Jitter), sooner the further
// along the job is, and sooner the shorter the runs learned.
func TestProgressPlansTheConsistentRuns(t *testing.T) {
	t.Parallel()
	p := schedule.Policy{}
	job := func(ran time.Duration, f float64, d *schedule.Dist) schedule.Job {
		return schedule.Job{Now: t0.Add(ran), Submitted: t0, StartedAt: t0, Phase: schedule.PhaseRunning,
			Polls: 3, Learned: total, LearnedRun: d, Progress: f}
	}
	median := func(j schedule.Job) time.Duration {
		r := rnd()
		ds := make([]time.Duration, 401)
		for i := range ds {
			ds[i] = p.Next(j, r)
		}
		return quantile(ds, 0.5)
	}
	const ran = 60 * time.Second
	prev := time.Duration(math.MaxInt64)
	for _, f := range []float64{0.55, 0.65, 0.75, 0.85, 0.95} {
		// In steps of 5 %, the report says 60 s is a share in
		// [f − 3 %, f + 5 % + 3 %) of the run.
		earliest := secs(ran.Seconds()/min(f+0.08, 1)) - ran
		latest := secs(ran.Seconds()/(f-0.03)) - ran
		within(t, p, job(ran, f, run), (earliest-time.Second)*8/10, latest*12/10)
		m := median(job(ran, f, run))
		require.Less(t, m, prev, "further along, sooner: f %g", f)
		prev = m
	}
	// At 5 % after a minute, nothing ends for six minutes: the longest
	// gap, spread in its top Jitter.
	within(t, p, job(ran, 0.05, run), 48*time.Second, time.Minute)

	// 30 % after 30 s (in steps of 10 %: a share in [27 %, 43 %)): the
	// run ends 40–81 s on. The estimate waits a minute (70 s ± 25 %,
	// capped); the plan polls sooner where the runs learned are shorter.
	exact := schedule.Policy{Jitter: 1e-9}
	fast, slow := learned(50, 0.3, 400, 15), learned(160, 0.3, 400, 14)
	prev = 0
	for _, learned := range []*schedule.Dist{fast, run, slow} {
		d := exact.Next(job(30*time.Second, 0.3, learned), rnd())
		require.Greater(t, d, prev+2*time.Second, "learned median %v", learned.Quantile(0.5))
		prev = d
	}
	require.Less(t, exact.Next(job(30*time.Second, 0.3, fast), rnd()), 50*time.Second)
	require.Equal(t, time.Minute, exact.Next(job(30*time.Second, 0.3, nil), rnd()).Round(time.Second))
}

// MaxDelay and MinDelay bound the progress rule's delays, in real time at
// any Scale, and it stays within the deadline.
func TestProgressBounds(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(9, 9))
	for range 20000 {
		p := schedule.Policy{
			MaxDelay: time.Duration(2+r.IntN(300)) * time.Second,
			MinDelay: time.Duration(r.IntN(3)) * time.Second,
			Jitter:   []float64{0.05, 0.2, 0.5}[r.IntN(3)],
			Scale:    []float64{1, 1, 20}[r.IntN(3)],
			PollCost: time.Duration(1+r.IntN(10)) * time.Second,
		}.WithDefaults()
		ran := time.Duration(1+r.IntN(600)) * time.Second
		step := []float64{0.01, 0.05, 0.1, 1.0 / 3, 1e-4}[r.IntN(5)]
		j := schedule.Job{Now: t0.Add(ran + 5*time.Second), Submitted: t0, StartedAt: t0.Add(5 * time.Second),
			Phase: schedule.PhaseRunning, Polls: 2, Learned: total, LearnedRun: []*schedule.Dist{run, total}[r.IntN(2)],
			Progress: math.Floor(r.Float64()/step) * step}
		if r.IntN(4) == 0 {
			j.Deadline = j.Now.Add(time.Duration(r.IntN(120)) * time.Second)
		}
		d := p.Next(j, r)
		limit := time.Duration(float64(p.MaxDelay) / p.Scale)
		// A delay held at a cap close to MinDelay is spread below it.
		floor := min(max(time.Duration(float64(p.MinDelay)/p.Scale), 50*time.Millisecond), time.Duration(float64(limit)*(1-p.Jitter)))
		require.LessOrEqual(t, d, max(limit, floor), "MaxDelay: %+v", j)
		if j.Deadline.IsZero() {
			require.GreaterOrEqual(t, d, floor, "MinDelay: %+v", j)
		} else {
			require.LessOrEqual(t, d, j.Deadline.Sub(j.Now), "deadline: %+v", j)
		}
	}
}

// quantile is the q-quantile of ds, sorted in place.
func quantile(ds []time.Duration, q float64) time.Duration {
	slices.Sort(ds)
	return ds[int(q*float64(len(ds)-1))]
}
