package schedule

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestProgressStep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ f, step float64 }{
		{0.3, 0.1}, {0.9, 0.1}, {0.1, 0.1}, // 10 %, or finer: the widest
		{0.35, 0.05}, {0.05, 0.05}, {0.95, 0.05},
		{0.37, 0.01}, {0.01, 0.01}, {0.99, 0.01}, {37.0 / 100, 0.01},
		{1.0 / 3, 1.0 / 3}, {2.0 / 3, 1.0 / 3}, {7.0 / 30, 1.0 / 30}, {0.125, 1.0 / 8}, {0.375, 1.0 / 8},
		{0.123456, exactStep}, {math.Pi / 4, exactStep}, // exact shares
	} {
		require.InDelta(t, tc.step, progressStep(tc.f), 1e-12, "f %g", tc.f)
	}
}

// firstPoll is solve's first poll on the same survival curve.
func TestFirstPollMatchesSolve(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 2000 {
		n := 1 + r.IntN(progressCells)
		s := make([]float64, n)
		// A survival curve from 1: flat, then falling in random drops.
		v, start := 1.0, r.IntN(n)
		for i := range s {
			if i > start && r.IntN(3) > 0 {
				v *= r.Float64()
			}
			s[i] = v
		}
		step := 0.05 + 3*r.Float64()
		c := costs{cost: 0.2 + 10*r.Float64(), minGap: 0.05 + 2*r.Float64()}
		c.maxGap = c.minGap + 60*r.Float64()
		require.Equal(t, int(solve(s, step, c, nil).next[0]), firstPoll(s, step, c), "trial %d", trial)
	}
}

// The smoothed table of a Dist is built once per Dist (by its id) and
// shared by every decision on it; the cache stays bounded; and a decision
// with it allocates nothing.
func TestSurvivalCache(t *testing.T) {
	var d, e Dist
	r := rand.New(rand.NewPCG(7, 8))
	for range 200 {
		x := time.Duration(80e9 * math.Exp(0.3*r.NormFloat64()))
		d.Observe(x)
		e.Observe(x)
	}
	st := survivals.get(&d)
	require.Same(t, st, survivals.get(&d), "cached")
	require.Same(t, st, survivals.get(&e), "the same contents, the same table")
	e.Observe(time.Minute)
	require.NotSame(t, st, survivals.get(&e), "new contents, a new table")
	require.InDelta(t, d.smoothed().Survival(90*time.Second), st.survival(binOf(90), 90), 1e-9)

	p := Policy{}
	j := Job{Now: t0p.Add(50 * time.Second), Submitted: t0p, StartedAt: t0p, Phase: PhaseRunning, Polls: 3,
		LearnedRun: &d, Progress: 0.55}
	rnd := rand.New(rand.NewPCG(1, 2))
	_, ok := p.WithDefaults().progressDelay(&j)
	require.True(t, ok)
	require.Zero(t, testing.AllocsPerRun(100, func() { p.Next(j, rnd) }))

	for i := range survCacheSize + 10 {
		f := d
		f.Observe(time.Duration(i+1) * time.Second)
		survivals.get(&f)
	}
	survivals.mu.Lock()
	defer survivals.mu.Unlock()
	require.LessOrEqual(t, len(survivals.m), survCacheSize)
}

var t0p = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
