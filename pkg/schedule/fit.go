package schedule

import (
	"math"
	"time"
)

// Fit learns how a model's durations grow with the length a job asks for
// (the seconds of video requested, say): a linear regression T ≈ a + b·ℓ,
// weighted like a Dist (an observation weighs half after HalfLife newer
// ones), and the distribution of the durations normalized by it — each
// observed T multiplied by FitUnit/predicted, as if every job were
// predicted to take FitUnit. For a job of length ℓ, For scales that
// distribution back by the prediction: a 10 s video of a model learned
// mostly on 5 s ones is planned around its own expected time, with the
// spread the model shows around its predictions.
//
// Without variation in the lengths seen, the prediction is proportional
// (T ∝ ℓ). A slope below 0 is taken as 0 (longer never means faster), and
// a prediction is never below a tenth of the mean duration. The zero value
// is empty; it is small and safe to copy. Durations are real time.
type Fit struct {
	// Decayed sums: weight, Σℓ, Σℓ², ΣT, ΣℓT (T in seconds).
	W  float64 `json:"w"`
	L  float64 `json:"l"`
	LL float64 `json:"ll"`
	T  float64 `json:"t"`
	LT float64 `json:"lt"`
	// Norm is the distribution of the durations normalized to FitUnit.
	Norm Dist `json:"norm"`
}

// FitUnit is the duration a Fit's normalized distribution is centred on.
const FitUnit = time.Minute

// fitWarm is how much weight a Fit needs before it normalizes an
// observation: earlier ones would be normalized by a line through a point
// or two.
const fitWarm = 3

// Observe records a job of the given length that took x. Lengths outside
// (0, 1e6) and durations of 0 or less are ignored.
func (f *Fit) Observe(length float64, x time.Duration) {
	if !(length > 0 && length < 1e6) || x <= 0 {
		return
	}
	t := x.Seconds()
	if f.W >= fitWarm {
		if p := f.predict(length); p > 0 {
			f.Norm.Observe(seconds(t * FitUnit.Seconds() / p))
		}
	}
	f.W = f.W*decay + 1
	f.L = f.L*decay + length
	f.LL = f.LL*decay + length*length
	f.T = f.T*decay + t
	f.LT = f.LT*decay + length*t
}

// Ready reports whether the Fit has seen enough to predict: minSamples
// effective samples of the normalized distribution.
func (f *Fit) Ready(minSamples float64) bool { return f.Norm.Weight() >= minSamples }

// Predict is the expected duration of a job of the given length; 0 before
// any observation.
func (f *Fit) Predict(length float64) time.Duration {
	return seconds(f.predict(length))
}

func (f *Fit) predict(length float64) float64 {
	if f.W <= 0 || !(length > 0) {
		return 0
	}
	meanL, meanT := f.L/f.W, f.T/f.W
	varL := f.LL/f.W - meanL*meanL
	var p float64
	if varL > 1e-4*meanL*meanL {
		b := max((f.LT/f.W-meanL*meanT)/varL, 0)
		p = meanT + b*(length-meanL)
	} else {
		p = meanT * length / meanL
	}
	return max(p, meanT/10)
}

// For is the distribution of the durations of a job of the given length:
// the normalized distribution scaled by the prediction, to the nearest
// eighth of an octave (a Dist's bin), so that jobs of nearby lengths share
// one distribution and one cached plan. It must not be modified.
func (f *Fit) For(length float64) *Dist {
	p := f.predict(length)
	if p <= 0 {
		return &f.Norm
	}
	return f.Norm.Scaled(p / FitUnit.Seconds())
}

// Scaled returns the distribution of s·T, s rounded to the nearest power
// of 2^(1/8) (a bin's width); weight beyond the histogram's ends stays in
// its first or last bin. It returns d itself when s rounds to 1.
func (d *Dist) Scaled(s float64) *Dist {
	if !(s > 0) || math.IsInf(s, 0) {
		return d
	}
	k := int(math.Round(binsPerOctave * math.Log2(s)))
	if k == 0 {
		return d
	}
	out := Dist{sum: d.sum, n: d.n}
	for i, w := range &d.w {
		out.w[min(max(i+k, 0), bins-1)] += w
	}
	out.id = (d.id ^ uint64(int64(k))) * fnvPrime
	return &out
}
