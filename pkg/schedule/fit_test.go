package schedule_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

// A model whose jobs take 20 s plus 12 s per second of video, with a
// lognormal spread of σ 0.2 around it, learned from lengths 2–10 s:
// predictions follow the line, also for a length never seen, and the
// distribution for a length sits around its prediction with the model's
// spread, not the mix of every length's.
func TestAFitRegressesDurationsOnLength(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	var f schedule.Fit
	truth := func(l float64) float64 { return 20 + 12*l }
	for range 2000 {
		l := 2 + 8*r.Float64()
		f.Observe(l, lognormal(r, truth(l), 0.2))
	}
	require.True(t, f.Ready(schedule.DefaultMinSamples))
	for _, l := range []float64{2, 5, 10, 20} {
		require.InEpsilon(t, truth(l), f.Predict(l).Seconds(), 0.12, "length %v", l)
		d := f.For(l)
		require.InEpsilon(t, truth(l), d.Quantile(0.5).Seconds(), 0.15, "median at length %v", l)
		spread := d.Quantile(0.9).Seconds() / d.Quantile(0.1).Seconds()
		require.Less(t, spread, 2.2, "length %v: the model's σ 0.2 (p90/p10 1.67), not the mix's", l)
	}
	require.Equal(t, f.For(5), f.For(5.05), "nearby lengths: one distribution, one identity, one cached plan")
}

// Lengths that never vary make a proportional prediction; a slope below
// zero is none.
func TestAFitWithoutVariationIsProportional(t *testing.T) {
	t.Parallel()
	var f schedule.Fit
	for range 50 {
		f.Observe(5, 50*time.Second)
	}
	require.InDelta(t, 100, f.Predict(10).Seconds(), 1e-6)

	var g schedule.Fit
	for i := range 60 {
		g.Observe(float64(1+i%5), time.Duration(100-i%5)*time.Second) // a little faster when longer
	}
	require.InDelta(t, g.Predict(1).Seconds(), g.Predict(5).Seconds(), 1e-6, "no negative slope")
	g.Observe(-1, time.Second)
	g.Observe(3, 0)
	require.InDelta(t, g.Predict(1).Seconds(), g.Predict(5).Seconds(), 1e-6, "nonsense ignored")
}

// Scaled moves the distribution by whole bins and keeps its weight.
func TestDistScaled(t *testing.T) {
	t.Parallel()
	d := learned(60, 0.3, 200, 3)
	s := d.Scaled(2)
	require.InEpsilon(t, 2*d.Quantile(0.5).Seconds(), s.Quantile(0.5).Seconds(), 0.01)
	require.InDelta(t, d.Weight(), s.Weight(), 1e-9)
	require.Same(t, d, d.Scaled(1.01), "less than half a bin: the same Dist")
	require.NotEqual(t, schedule.Policy{}.Plan(d).Times(3), schedule.Policy{}.Plan(s).Times(3), "a new identity: its own plan")
}
