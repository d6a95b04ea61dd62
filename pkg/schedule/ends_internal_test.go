package schedule

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A job that may fail at any point of its run, and waited a minute for its
// start, is polled as the cost-optimal plan of its end says — the mixture
// of its run and its failures, each on its own clock — on the fine grid of
// any plan, wherever it is in its run: the plan of the end, cached, not a
// coarse one solved at each decision (on 128 cells of 6–7 s here, as it
// was, its polls came up to 4.6 s off the plan's). The wait, 64 s, is a
// whole quarter octave: the plan's own (endsShiftSteps).
func TestMidRunFailuresFollowThePlanOfTheEnd(t *testing.T) {
	t.Parallel()
	const share, q = 0.05, 64 * time.Second
	r := rand.New(rand.NewPCG(3, 4))
	run, failed := &Dist{}, &Dist{}
	for range 4000 {
		wait, x := 60*r.ExpFloat64(), 200*math.Exp(0.4*r.NormFloat64())
		if r.Float64() < share {
			failed.Observe(seconds(wait + x*r.Float64())) // at a uniform point of the run
			continue
		}
		run.Observe(seconds(x))
	}
	sr, sf := run.smoothed(), failed.smoothed() // as the policy plans them
	end := func(x time.Duration) float64 {      // P(T > x) on the run's clock, for a job that started
		return ((1-share)*sr.Survival(x) + share*sf.Survival(q+x)) / ((1 - share) + share*sf.Survival(q))
	}
	p := Policy{Jitter: 1e-9}
	plan := p.PlanSurvival(end, max(sr.Quantile(1-tailMass), sf.Quantile(1-tailMass)-q)) // as far as the plan of the end
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for ran := 20 * time.Second; ran <= 300*time.Second; ran += 7 * time.Second {
		j := Job{Now: t0.Add(q + ran), Submitted: t0, StartedAt: t0.Add(q), Phase: PhaseRunning, Polls: 3,
			LearnedRun: run, LearnedFailed: failed, FailedShare: share}
		require.InDelta(t, plan.Delay(ran).Seconds(), p.Next(j, rand.New(rand.NewPCG(1, 2))).Seconds(), 0.6, "run %s", ran)
	}
}
