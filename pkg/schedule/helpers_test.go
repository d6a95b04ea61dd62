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
