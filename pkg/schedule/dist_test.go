package schedule_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

func TestDistConvergesOnAKnownDistribution(t *testing.T) {
	t.Parallel()
	const median, sigma = 90.0, 0.5
	d := learned(median, sigma, 2000, 3)
	// ~72 effective samples: quantiles within 15%, survival within 0.1.
	for _, q := range []float64{0.1, 0.25, 0.5, 0.75, 0.9} {
		z := math.Sqrt2 * math.Erfinv(2*q-1)
		want := median * math.Exp(sigma*z)
		require.InEpsilon(t, want, d.Quantile(q).Seconds(), 0.15, "quantile %g", q)
		require.InDelta(t, 1-q, d.Survival(secs(want)), 0.1, "survival at the %g quantile", q)
	}
	require.InDelta(t, 1/(1-math.Exp2(-1.0/schedule.HalfLife)), d.Weight(), 1e-6, "the effective sample count saturates")
	require.EqualValues(t, 2000, d.Count())
}

func TestDistFollowsASlowdown(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 5))
	var d schedule.Dist
	for range 500 {
		d.Observe(lognormal(r, 30, 0.2))
	}
	require.InEpsilon(t, 30, d.Quantile(0.5).Seconds(), 0.1)
	slow := func(n int) {
		for range n {
			d.Observe(lognormal(r, 150, 0.2))
		}
	}
	// The regimes do not overlap: the mass above 60 s is the new one's.
	slow(schedule.HalfLife)
	require.InDelta(t, 0.5, d.Survival(time.Minute), 0.01, "half the weight after a half-life")
	slow(schedule.HalfLife)
	require.InDelta(t, 0.75, d.Survival(time.Minute), 0.01, "three quarters after 100 jobs")
	require.InEpsilon(t, 150*math.Exp(0.2*1.2816), d.Quantile(0.9).Seconds(), 0.1, "the slow tail is followed")
	require.Greater(t, d.Quantile(0.5), 2*time.Minute, "and the median")
}

func TestDistEdges(t *testing.T) {
	t.Parallel()
	var empty schedule.Dist
	require.Zero(t, empty.Weight())
	require.Equal(t, 1.0, empty.Survival(time.Hour))
	require.Zero(t, empty.Quantile(0.5))

	var d schedule.Dist
	d.Observe(-time.Second) // clamped into the first bin
	d.Observe(0)
	d.Observe(100 * time.Hour) // clamped into the last
	require.Less(t, d.Quantile(0.1), 100*time.Millisecond)
	require.Greater(t, d.Quantile(1), 30*time.Hour)
	require.Equal(t, 1.0, d.Survival(0))
	require.Zero(t, d.Survival(1000*time.Hour))
	for _, x := range []time.Duration{time.Millisecond, time.Second, time.Minute, time.Hour} {
		s := d.Survival(x)
		require.True(t, s >= 0 && s <= 1)
	}
}

func TestDistIsSafeToCopy(t *testing.T) {
	t.Parallel()
	a := learned(30, 0.3, 100, 1)
	b := *a
	b.Observe(time.Hour)
	require.Less(t, a.Quantile(0.999), 10*time.Minute, "observing the copy leaves the original")
	require.Greater(t, b.Quantile(0.999), 30*time.Minute)
}

func TestDistJSON(t *testing.T) {
	t.Parallel()
	d := learned(90, 0.5, 1000, 7)
	data, err := json.Marshal(d)
	require.NoError(t, err)
	require.Less(t, len(data), 1024)

	var back schedule.Dist
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, d.Count(), back.Count())
	require.InEpsilon(t, d.Weight(), back.Weight(), 1e-3)
	for _, q := range []float64{0.01, 0.5, 0.99} {
		require.InEpsilon(t, d.Quantile(q).Seconds(), back.Quantile(q).Seconds(), 1e-3)
	}
	again, err := json.Marshal(&back)
	require.NoError(t, err)
	require.JSONEq(t, string(data), string(again), "deterministic")

	// The widest possible: every bin holds weight.
	var wide schedule.Dist
	for i := range 2000 {
		wide.Observe(secs(0.05 * math.Pow(2, float64(i%170)/8)))
	}
	data, err = json.Marshal(&wide)
	require.NoError(t, err)
	require.Less(t, len(data), 2048, "well under the 4 KiB a KV value should take")
	empty, err := json.Marshal(schedule.Dist{})
	require.NoError(t, err)
	require.JSONEq(t, `{"v":1,"n":0,"first":0,"w":[]}`, string(empty))
}

func TestDistJSONRejects(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, problem string }{
		{"not an object", `[1]`, "decoding"},
		{"version", `{"v":2,"n":1,"first":0,"w":[1]}`, "version 2"},
		{"negative first", `{"v":1,"n":1,"first":-1,"w":[1]}`, "outside"},
		{"past the last bin", `{"v":1,"n":1,"first":160,"w":[1,1,1,1,1,1,1,1,1]}`, "outside"},
		{"negative weight", `{"v":1,"n":1,"first":3,"w":[1,-1]}`, "weight 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d schedule.Dist
			err := d.UnmarshalJSON([]byte(tt.in))
			require.Error(t, err)
			require.True(t, strings.Contains(err.Error(), tt.problem), err.Error())
		})
	}
}

// A sparse distribution leans on a broader prior for what it lacks of
// strength, and stands alone once it has that many samples.
func TestWithPrior(t *testing.T) {
	t.Parallel()
	var prior, few, many schedule.Dist
	for range 60 {
		prior.Observe(100 * time.Second)
	}
	for range 2 {
		few.Observe(10 * time.Second)
	}
	for range 30 {
		many.Observe(10 * time.Second)
	}
	var empty schedule.Dist
	require.Same(t, &many, many.WithPrior(&prior, 20), "enough samples: no prior")
	require.Same(t, &few, few.WithPrior(nil, 20))
	require.Same(t, &few, few.WithPrior(&empty, 20))

	b := few.WithPrior(&prior, 20)
	require.InDelta(t, 20, b.Weight(), 1e-6, "the prior fills what is missing of the strength")
	require.InDelta(t, 0.1, 1-b.Survival(50*time.Second), 0.01, "the two own samples keep their weight")
	require.Greater(t, b.Quantile(0.5), 50*time.Second, "the prior carries the rest")
	require.Equal(t, b.Quantile(0.5), few.WithPrior(&prior, 20).Quantile(0.5), "deterministic")
	require.Equal(t, uint64(2), few.Count(), "the receiver is not changed")

	var small schedule.Dist
	for range 5 {
		small.Observe(100 * time.Second)
	}
	require.InDelta(t, few.Weight()+small.Weight(), few.WithPrior(&small, 20).Weight(), 1e-6, "a prior adds at most its own weight")

	// The blend's plan is cached by the two distributions' identities.
	p := schedule.Policy{}
	require.Same(t, p.Plan(few.WithPrior(&prior, 20)), p.Plan(few.WithPrior(&prior, 20)))
}
