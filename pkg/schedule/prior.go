package schedule

import (
	"math"
	"sync"
	"time"
)

// A model seen a few dozen times has a noisy histogram; one never seen
// has none, and the cold-start table plans from the submission's
// expected duration alone. Between the two, the learned durations are
// shrunk toward a prior from that hint: a lognormal centred on it
// (priorSigma wide in log time, as a row of the table spans a factor of
// four), added to the histogram as priorStrength pseudo-samples, so the
// data's share of the blend, n/(n + k), grows with the n samples seen.
//
// The prior's strength k is empirical: it is priorStrength scaled by how
// well the learned median agrees with the hint, exp(−z²/2) for z the
// log ratio of the two in units of priorSigma. A hint the model's jobs
// bear out keeps its weight; one they contradict (a median twice or half
// the hint, z ≈ 1.4) keeps a third, four times off nothing, so a wrong
// hint costs what the table would, and no more. The prior fades as the
// model's jobs add up, to nothing after priorFade of them (a Dist's
// effective samples stop growing at about 73; its count does not).
//
// Where the job's end is a mixture (LearnedFailed, FailedShare), the
// hint speaks of the successes alone: the prior is the hint's mixed with
// the learned failures by their share, so a model's early rejections
// keep their weight in the blend.
//
// The blend is planned as a learned distribution (Policy.MinSamples
// counts the pseudo-samples): a model whose hint is borne out leaves the
// table after its first handful of completions, not after MinSamples.

// Prior settings (see above).
const (
	priorSigma    = 0.5
	priorStrength = 12.0
	priorFade     = 4 * HalfLife
	// priorFloor is the least pseudo-weight worth adding.
	priorFloor = 0.5
)

// HintPrior returns the prior distribution of a job's durations given its
// expected duration (the submission's hint): lognormal, median expected,
// σ priorSigma, weighing priorStrength. Nil for no hint. It must not be
// modified.
func HintPrior(expected time.Duration) *Dist {
	if expected <= 0 {
		return nil
	}
	k := binOf(expected.Seconds())
	hintPriors.mu.Lock()
	defer hintPriors.mu.Unlock()
	if d := hintPriors.m[k]; d != nil {
		return d
	}
	// Centred on the bin's middle, so each bin has one prior.
	mid := math.Log((edges[k] + edges[k+1]) / 2)
	if k == 0 {
		mid = math.Log(edges[1] / 2)
	}
	cdf := func(x float64) float64 {
		if x <= 0 {
			return 0
		}
		return 0.5 * math.Erfc(-(math.Log(x)-mid)/(priorSigma*math.Sqrt2))
	}
	d := &Dist{}
	for i := range bins {
		d.w[i] = priorStrength * (cdf(edges[i+1]) - cdf(edges[i]))
	}
	d.w[bins-1] += priorStrength * (1 - cdf(edges[bins]))
	d.rehash()
	hintPriors.m[k] = d
	return d
}

var hintPriors = struct {
	mu sync.Mutex
	m  map[int]*Dist
}{m: map[int]*Dist{}}

// Shrunk returns learned, the learned distribution of a job's durations,
// shrunk toward the prior of its expected duration until it has seen
// priorFade jobs (see above); learned itself without a hint, without a
// sample, or past the fade. It must not be modified.
func Shrunk(learned *Dist, expected time.Duration) *Dist {
	return shrunk(learned, expected, HintPrior(expected))
}

// shrunk is Shrunk toward a given prior of the hint.
func shrunk(learned *Dist, expected time.Duration, prior *Dist) *Dist {
	if prior == nil || learned == nil || learned.Weight() <= 0 || learned.Count() >= priorFade {
		return learned
	}
	z := math.Log(learned.Quantile(0.5).Seconds()/expected.Seconds()) / priorSigma
	fade := 1 - float64(learned.Count())/priorFade
	k := priorStrength * math.Exp(-z*z/2) * fade
	if !(k >= priorFloor) { // also NaN
		return learned
	}
	// Quantised, so a model's blend, and its plan, change only when the
	// agreement does.
	k = math.Round(k*4) / 4
	return learned.WithPrior(prior, learned.Weight()+k)
}
