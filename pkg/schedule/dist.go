package schedule

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// The histogram of a Dist: binsPerOctave log-spaced bins from minEdge up,
// octaves of them. Durations below the first edge count in the first bin,
// above the last edge in the last one.
const (
	binsPerOctave = 8  // bins are 2^(1/8) ≈ 9% wide
	octaves       = 21 // 1/16 s .. 2^17 s ≈ 36 h
	bins          = binsPerOctave * octaves
	minEdge       = 1.0 / 16 // seconds
)

// HalfLife is the number of observations after which an observation
// weighs half as much as a new one: 100 jobs after a provider slows down,
// the slow jobs hold three quarters of a Dist's weight. Its Weight tends to
// 1/(1 − 2^(−1/HalfLife)) ≈ 72.6 once it has seen many jobs.
const HalfLife = 50

var (
	decay = math.Exp2(-1.0 / HalfLife)
	// edges[k] is the lower edge of bin k in seconds; edges[0] is 0.
	edges = func() (e [bins + 1]float64) {
		for k := 1; k <= bins; k++ {
			e[k] = minEdge * math.Exp2(float64(k)/binsPerOctave)
		}
		return e
	}()
)

// prune is the weight below which a bin is emptied: an observation decays
// to it after about a thousand newer ones. It keeps the encoding short.
const prune = 1e-6

// Dist is a learned distribution of job durations: a histogram of 168
// log-spaced bins from 1/16 s to 36 h whose weights decay by half every
// HalfLife observations, so recent jobs count most. It is small (its JSON
// encoding stays under 2 KiB), deterministic and safe to copy; the zero
// value is empty. Durations are real time.
//
// Pollux keeps one Dist per route, model and optional configuration key
// in the pollux-stats bucket and updates it with compare-and-set whenever a
// job ends; Policy.Next uses it once its Weight reaches Policy.MinSamples.
type Dist struct {
	w   [bins]float64
	sum float64 // Σ w, the effective sample count
	n   uint64  // observations ever
	id  uint64  // identifies the contents for the plan cache
}

// Observe records one job's duration: every earlier observation's weight
// decays by 2^(-1/HalfLife) and d's bin gains 1.
func (d *Dist) Observe(x time.Duration) {
	k := binOf(x.Seconds())
	pruned := 0.0
	for i, w := range &d.w {
		w *= decay
		if w < prune && w > 0 {
			pruned += w
			w = 0
		}
		d.w[i] = w
	}
	d.w[k]++
	d.sum = d.sum*decay + 1 - pruned
	d.n++
	// The id follows the history: equal histories, equal contents. A
	// decoded Dist starts from a hash of its contents.
	d.id = (d.id^uint64(k+1))*fnvPrime + d.n
}

// Weight is the effective sample count: the sum of the decayed weights.
func (d *Dist) Weight() float64 { return d.sum }

// Count is the number of observations ever made.
func (d *Dist) Count() uint64 { return d.n }

// ID identifies the Dist's contents: equal IDs, equal distributions (the
// key its plans are cached by).
func (d *Dist) ID() uint64 { return d.id }

// Survival is the share of jobs still unfinished after t: P(T > t). An
// empty Dist returns 1.
func (d *Dist) Survival(t time.Duration) float64 {
	if d.sum <= 0 {
		return 1
	}
	x := t.Seconds()
	if x <= 0 {
		return 1
	}
	k := binOf(x)
	tail := 0.0
	for i := k + 1; i < bins; i++ {
		tail += d.w[i]
	}
	return min(1, (tail+d.w[k]*binAbove(k, x))/d.sum)
}

// Quantile returns the duration below which a share q of jobs finish
// (0 ≤ q ≤ 1), interpolating within a bin. An empty Dist returns 0.
func (d *Dist) Quantile(q float64) time.Duration {
	if d.sum <= 0 {
		return 0
	}
	target := min(max(q, 0), 1) * d.sum
	acc := 0.0
	last := 0
	for k, w := range &d.w {
		if w == 0 {
			continue
		}
		last = k
		if acc+w >= target {
			f := (target - acc) / w
			return seconds(edges[k] + f*(edges[k+1]-edges[k]))
		}
		acc += w
	}
	return seconds(edges[last+1])
}

// survivalGrid fills s[i] with P(T > i·step), T in seconds, walking the
// grid and the bins together. An empty Dist is all 1.
func (d *Dist) survivalGrid(s []float64, step float64) {
	if d.sum <= 0 {
		for i := range s {
			s[i] = 1
		}
		return
	}
	tail := d.sum // Σ w of the bins at or above k
	k := 0
	for i := range s {
		x := float64(i) * step
		for k < bins-1 && x >= edges[k+1] {
			tail -= d.w[k]
			k++
		}
		s[i] = min(1, max(0, (tail-d.w[k]*(1-binAbove(k, x)))/d.sum))
	}
}

// WithPrior returns d completed by a prior distribution (a broader one: the
// model's without its settings, the route's) while d has fewer than
// strength effective samples: the prior's histogram, scaled to weigh what
// d lacks of strength — at most its own weight — is added to d's. A
// configuration seen twice leans on its model's history; one seen twenty
// times stands alone. With nothing to add it returns d itself; otherwise a
// new Dist whose identity follows both, so plans of it are cached.
func (d *Dist) WithPrior(prior *Dist, strength float64) *Dist {
	if prior == nil || prior.sum <= 0 || d.sum >= strength {
		return d
	}
	share := min((strength-d.sum)/prior.sum, 1)
	out := *d
	for k, w := range &prior.w {
		out.w[k] += w * share
	}
	out.sum = d.sum + prior.sum*share
	out.id = ((d.id*fnvPrime)^prior.id)*fnvPrime ^ math.Float64bits(share)
	return &out
}

// Mixed returns the mixture of d, with weight 1 − share, and other, with
// weight share (0 ≤ share ≤ 1): the distribution of a job that ends as
// other says with the chance share and as d says otherwise — succeeded
// and failed jobs learned apart, the share of failures learned over far
// more jobs than either histogram holds. Its Weight is the two's sum. With
// an empty part, or a share of 0, it returns the other part.
func (d *Dist) Mixed(other *Dist, share float64) *Dist {
	share = math.Round(min(max(share, 0), 1)*1000) / 1000
	switch {
	case other == nil || other.sum <= 0 || share == 0:
		return d
	case d.sum <= 0 || share == 1:
		return other
	}
	out := Dist{sum: d.sum + other.sum, n: d.n + other.n}
	a, b := (1-share)*out.sum/d.sum, share*out.sum/other.sum
	for k := range &out.w {
		out.w[k] = d.w[k]*a + other.w[k]*b
	}
	out.id = ((d.id*fnvPrime)^other.id)*fnvPrime ^ math.Float64bits(share) ^ 0x6d6978
	return &out
}

// binOf returns the bin of a duration in seconds.
func binOf(x float64) int {
	if !(x > minEdge) { // also NaN
		return 0
	}
	return min(int(binsPerOctave*math.Log2(x/minEdge)), bins-1)
}

// binAbove is the share of bin k above x, the bin's mass being uniform
// between its edges.
func binAbove(k int, x float64) float64 {
	lo, hi := edges[k], edges[k+1]
	return min(1, max(0, (hi-x)/(hi-lo)))
}

func seconds(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// rehash recomputes the sum and id after the weights were set directly.
func (d *Dist) rehash() {
	d.sum = 0
	h := uint64(fnvOffset)
	for _, w := range &d.w {
		d.sum += w
		h = (h ^ math.Float64bits(w)) * fnvPrime
	}
	d.id = h
}

// distVersion is the version of the stored form.
const distVersion = 1

// MarshalJSON encodes the Dist compactly, for example
// {"v":1,"n":312,"first":85,"w":[0.5,3.25,12.1,2,0.25]}.
func (d Dist) MarshalJSON() ([]byte, error) {
	lo, hi := 0, -1
	for k, w := range &d.w {
		if w > 0 {
			if hi < 0 {
				lo = k
			}
			hi = k
		}
	}
	b := fmt.Appendf(nil, `{"v":%d,"n":%d,"first":%d,"w":[`, distVersion, d.n, lo)
	for k := lo; k <= hi; k++ {
		if k > lo {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, d.w[k], 'g', 4, 64)
	}
	return append(b, "]}"...), nil
}

// UnmarshalJSON decodes what MarshalJSON encodes, rejecting a version,
// bin or weight out of range.
func (d *Dist) UnmarshalJSON(data []byte) error {
	var j struct {
		V     int       `json:"v"`
		Count uint64    `json:"n"`
		First int       `json:"first"`
		W     []float64 `json:"w"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("schedule: decoding a Dist: %w", err)
	}
	switch {
	case j.V != distVersion:
		return fmt.Errorf("schedule: Dist version %d, want %d", j.V, distVersion)
	case j.First < 0 || j.First+len(j.W) > bins:
		return fmt.Errorf("schedule: Dist bins %d..%d outside 0..%d", j.First, j.First+len(j.W)-1, bins-1)
	}
	var nd Dist
	for i, w := range j.W {
		if !(w >= 0) || math.IsInf(w, 0) {
			return errors.New("schedule: Dist weight " + strconv.Itoa(i) + " is not a finite number >= 0")
		}
		nd.w[j.First+i] = w
	}
	nd.n = j.Count
	nd.rehash()
	*d = nd
	return nil
}

// bandwidths are the kernel widths, in bins, smoothed tries.
var bandwidths = [...]float64{0.5, 0.75, 1, 1.5, 2, 3, 4, 6}

// smoothed returns the Dist's histogram smoothed by the Gaussian kernel in
// log time whose width, among bandwidths, maximises the leave-one-out
// likelihood of the observations: wide for a noisy unimodal
// distribution, narrow where there are distinct modes. A plan fitted to an
// unsmoothed histogram of ~70 jobs chases its noise.
func (d *Dist) smoothed() *Dist {
	if d.sum <= 1 {
		return d
	}
	var best Dist
	bestLL := math.Inf(-1)
	var s Dist
	for _, h := range bandwidths {
		ll := d.smooth(&s, h)
		if ll > bestLL {
			best, bestLL = s, ll
		}
	}
	best.n = d.n
	best.rehash()
	return &best
}

// smooth sets s to d smoothed with a kernel of width h bins and returns the
// leave-one-out log likelihood of d's observations under it.
func (d *Dist) smooth(s *Dist, h float64) float64 {
	reach := int(math.Ceil(3 * h))
	var kern [2*6*3 + 1]float64 // reach ≤ 3·max(bandwidths)
	norm := 0.0
	for i := -reach; i <= reach; i++ {
		x := float64(i) / h
		kern[i+reach] = math.Exp(-x * x / 2)
		norm += kern[i+reach]
	}
	for i := range 2*reach + 1 {
		kern[i] /= norm
	}
	s.w = [bins]float64{}
	for j, w := range &d.w {
		if w == 0 {
			continue
		}
		for k := max(0, j-reach); k <= min(bins-1, j+reach); k++ {
			s.w[k] += w * kern[k-j+reach]
		}
	}
	ll := 0.0
	for j, w := range &d.w {
		if w == 0 {
			continue
		}
		own := min(w, 1) // one observation's weight, at most
		f := (s.w[j] - own*kern[reach]) / (d.sum - own)
		ll += w * math.Log(max(f, 1e-12))
	}
	return ll
}
