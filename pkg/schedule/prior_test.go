package schedule_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

// planCost is what a plan costs jobs of the survival function s, in
// polls: E[polls] + E[poll times past the end]/PollCost, less the E[T]
// every plan pays alike (see Plan).
func planCost(pl *schedule.Plan, s func(time.Duration) float64, cost time.Duration) float64 {
	times := pl.Times(400)
	c, prev := 0.0, time.Duration(0)
	for _, t := range times {
		sp := s(prev)
		c += sp * (1 + (t-prev).Seconds()/cost.Seconds())
		prev = t
	}
	return c
}

// A plan from a few dozen samples is closer to the true distribution's
// plan with the hint's prior than without: over 60 draws of 12, 25 and 50
// samples of lognormal 90 s (σ 0.5), hinted at 90 s, the shrunk plans'
// excess cost over the true plan is the smaller, in total and at each
// size. Without the shrinkage (Shrunk returning learned) the two are the
// same and this fails.
func TestShrinkageBringsAFewSamplesNearerTheTruePlan(t *testing.T) {
	t.Parallel()
	p := schedule.Policy{MinSamples: 1}
	truth := lognormalSurvival(90, 0.5)
	best := planCost(p.PlanSurvival(truth, 20*time.Minute), truth, schedule.DefaultPollCost)
	for _, n := range []int{12, 25, 50} {
		var raw, shrunk float64
		for seed := range uint64(60) {
			d := learned(90, 0.5, n, 1000+seed)
			raw += planCost(p.Plan(d), truth, schedule.DefaultPollCost) - best
			shrunk += planCost(p.Plan(schedule.Shrunk(d, 90*time.Second)), truth, schedule.DefaultPollCost) - best
		}
		t.Logf("%d samples: excess cost %.3f polls a job raw, %.3f shrunk", n, raw/60, shrunk/60)
		require.Less(t, shrunk, raw, "%d samples", n)
	}
}

// The prior follows the hint: a hint the samples contradict (four times
// their median) weighs nothing, one they bear out its full strength, and
// a model seen priorFade (200) times stands alone.
func TestShrinkageWeighsTheHintByItsAgreement(t *testing.T) {
	t.Parallel()
	d := learned(90, 0.5, 30, 3)
	require.Same(t, d, schedule.Shrunk(d, 0), "no hint")
	require.Same(t, d, schedule.Shrunk(d, 360*time.Second), "a hint four times off")
	agreed := schedule.Shrunk(d, 90*time.Second)
	require.NotSame(t, d, agreed)
	require.Greater(t, agreed.Weight(), d.Weight()+5, "a borne-out hint adds pseudo-samples")
	require.InDelta(t, 90, agreed.Quantile(0.5).Seconds(), 15)
	old := learned(90, 0.5, 200, 3)
	require.Same(t, old, schedule.Shrunk(old, 90*time.Second), "seen 200 times")
	prior := schedule.HintPrior(time.Minute)
	require.InDelta(t, 60, prior.Quantile(0.5).Seconds(), 4)
	require.InDelta(t, math.Exp(0.5*1.2816), prior.Quantile(0.9).Seconds()/prior.Quantile(0.5).Seconds(), 0.15, "σ 0.5")
}

// A model whose hint its first completions bear out leaves the cold-start
// table with fewer than MinSamples of them: the prior counts.
func TestShrunkModelLeavesTheTableEarly(t *testing.T) {
	t.Parallel()
	p := schedule.Policy{}
	d := learned(60, 0.3, 12, 4)
	j := schedule.Job{Now: t0, Submitted: t0, Expected: time.Minute, Learned: d}
	r := rnd()
	got := p.Next(j, r)
	want := p.Plan(schedule.Shrunk(d, time.Minute)).Delay(0)
	require.InDelta(t, want.Seconds(), got.Seconds(), 0.11*want.Seconds(), "the shrunk plan's first poll, not the table's 4–8 s")
	require.Greater(t, got, 8*time.Second)
}
