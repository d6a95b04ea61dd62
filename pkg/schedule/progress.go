package schedule

import (
	"math"
	"sync"
	"time"
)

// A provider's progress report f, after a run of r, says the job's run
// time T has an elapsed share r/T of about f. Providers round it down to a
// step s (1 %, 5 %, 10 %, a stage of n) and the share they report need not
// follow the clock exactly, so the share is taken to lie in
// [f − progressSlack, f + s + progressSlack), likelier in the middle than
// at the edges: the likelihood of the report is that of a share rounded
// down after an error uniform in ±progressSlack (a trapezoid). The learned
// run times weighted by it, and restricted to T > r, are the remaining-time
// distribution the next poll is planned on.
const progressSlack = 0.03

// progressSteps are the steps a report's granularity is matched against,
// largest first: a report that is a multiple of one may come in that step,
// and assuming the largest keeps the window wide enough.
var progressSteps = [...]float64{0.1, 0.05, 0.01}

// maxStages is the most stages (a step of 1/n) a report that is no
// multiple of 1 % is matched against; finer reports are taken as exact,
// in steps of exactStep.
const (
	maxStages = 100
	exactStep = 0.001
)

// progressCells is the size of the grid the remaining time is planned
// on; a cell spans at most MaxDelay/progressMaxCell, so the grid looks
// progressCells·MaxDelay/progressMaxCell ahead at most (8 minutes at the
// default 60 s).
const (
	progressCells   = 32
	progressMaxCell = 4
)

// progressDelay is the delay, in real time, after which to poll a running
// job that reported its progress: the first poll of the cost-optimal plan
// for the learned run times consistent with the report (see
// progressSlack). It does not apply (ok false) to a job with an ETA, a
// progress outside (0, 1), no start time or no ready LearnedRun, or when
// the learned run times leave no mass in the window.
func (p Policy) progressDelay(j *Job) (d time.Duration, ok bool) {
	f := j.Progress
	if j.ETA > 0 || !(f > 0 && f < 1) || j.StartedAt.IsZero() || !p.ready(j.LearnedRun) {
		return 0, false
	}
	r := j.Now.Sub(j.StartedAt).Seconds()
	if !(r > 0) {
		return 0, false
	}
	c := p.costs()
	s := progressStep(f)
	if earliest := r / min(f+s+progressSlack, 1); earliest-r >= c.maxGap {
		// Nothing ends before the longest gap: no need to plan.
		return seconds(c.maxGap), true
	}
	// The latest end the report allows; a share near 0 allows any, so
	// look at most as far as the grid can see finely.
	end := r / max(f-progressSlack, f/2)
	end = min(end, r+progressCells*c.maxGap/progressMaxCell)
	next, ok := survivals.get(j.LearnedRun).nextPoll(r, end, f, s, c)
	if !ok {
		return 0, false
	}
	return seconds(min(max(next, c.minGap), c.maxGap)), true
}

// progressStep infers the step in which a provider reports its progress
// from one report f: the largest of progressSteps that f is a multiple
// of; else 1/n for the least n ≤ maxStages that makes f a multiple of 1/n
// (a job of n stages); else exactStep, a report taken as exact. A provider
// reporting in 1 % steps is taken for one in 10 % steps at 0.3: a wider
// window, never a narrower one.
func progressStep(f float64) float64 {
	for _, s := range progressSteps {
		if k := f / s; math.Abs(k-math.Round(k)) < 1e-6 {
			return s
		}
	}
	for n := 2; n <= maxStages; n++ {
		if k := f * float64(n); math.Abs(k-math.Round(k)) < 1e-6 {
			return 1 / float64(n)
		}
	}
	return exactStep
}

// progressLikelihood is the chance that a provider reports f, in steps of
// s after an error uniform in ±progressSlack, when the elapsed share is
// phi.
func progressLikelihood(phi, f, s float64) float64 {
	return max(0, min(f+s-phi, progressSlack)-max(f-phi, -progressSlack)) / (2 * progressSlack)
}

// survTable is a learned distribution smoothed as for a Plan and
// normalised, ready to answer P(T > t).
type survTable struct {
	w    [bins]float64 // bin weights, summing to 1
	tail [bins + 1]float64
}

func newSurvTable(d *Dist) *survTable {
	sd := d.smoothed()
	st := &survTable{}
	for k := bins - 1; k >= 0; k-- {
		st.w[k] = sd.w[k] / sd.sum
		st.tail[k] = st.tail[k+1] + st.w[k]
	}
	return st
}

// nextPoll plans the polls of a job that has run r seconds, reporting f in
// steps of s, whose end lies in (r, end]: it returns the time from now of
// the plan's first poll. It solves Plan's dynamic programme on a grid of
// progressCells over (r, end], for the learned run times weighted by the
// report's likelihood; without allocating, in a few µs. ok is false when
// the learned run times leave no mass there.
func (st *survTable) nextPoll(r, end, f, s float64, c costs) (next float64, ok bool) {
	const n = progressCells
	h := (end - r) / n
	if !(h > 0) {
		return 0, false
	}
	// mass[i]: P(T in cell i) times the report's likelihood at its middle.
	var mass [n]float64
	k := binOf(r)
	prev := st.survival(k, r)
	total := 0.0
	for i := range mass {
		x := r + float64(i+1)*h
		for k < bins-1 && x >= edges[k+1] {
			k++
		}
		sx := st.survival(k, x)
		mass[i] = (prev - sx) * progressLikelihood(r/(x-h/2), f, s)
		total += mass[i]
		prev = sx
	}
	if !(total > 1e-12) {
		return 0, false
	}
	// sv[i] = P(T > r + i·h | the report, T > r); 0 past the grid.
	var sv [n]float64
	acc := 0.0
	for i := n - 1; i >= 0; i-- {
		acc += mass[i]
		sv[i] = acc / total
	}
	return float64(firstPoll(sv[:], h, c)) * h, true
}

// firstPoll is solve's first poll, next[0], for s[i] = P(T > i·step) on
// at most progressCells cells, without allocating.
func firstPoll(s []float64, step float64, c costs) int {
	n := len(s)
	perCell := step / c.cost
	ka := max(1, int(math.Ceil(c.minGap/step-1e-9)))
	kb := max(ka, int(c.maxGap/step+1e-9))
	var w [progressCells + 1]float64 // w[n] = 0: nothing to pay past the grid
	bound := n
	for i := n - 1; i >= 0; i-- {
		// Plan's recurrence and Monge bound (see solve).
		slope := s[i] * perCell
		lo, hi := min(i+ka, n), min(i+kb, bound)
		best, bj := math.Inf(1), hi
		gap := float64(lo - i)
		for j, wj := range w[lo : hi+1] {
			// <= prefers the later poll on a tie: fewer polls.
			if x := slope*gap + wj; x <= best {
				best, bj = x, lo+j
			}
			gap++
		}
		w[i] = s[i] + best
		bound = bj
	}
	return bound
}

// survival is P(T > x), x in seconds in bin k.
func (st *survTable) survival(k int, x float64) float64 {
	if x <= 0 {
		return 1
	}
	return min(1, st.tail[k+1]+st.w[k]*binAbove(k, x))
}

// survCacheSize bounds the cache of survTables (2.7 KiB each).
const survCacheSize = 64

// survCache is a bounded map from a Dist's id to its survTable, evicting
// the oldest entry: smoothing (tens of µs) is done once per distribution,
// as a Plan is built once.
type survCache struct {
	mu   sync.Mutex
	m    map[uint64]*survTable
	ring [survCacheSize]uint64
	head int
}

var survivals = &survCache{m: make(map[uint64]*survTable, survCacheSize)}

func (c *survCache) get(d *Dist) *survTable {
	c.mu.Lock()
	st := c.m[d.id]
	c.mu.Unlock()
	if st != nil {
		return st
	}
	st = newSurvTable(d)
	c.mu.Lock()
	defer c.mu.Unlock()
	if had, ok := c.m[d.id]; ok {
		return had
	}
	if len(c.m) == survCacheSize {
		delete(c.m, c.ring[c.head])
	}
	c.ring[c.head] = d.id
	c.head = (c.head + 1) % survCacheSize
	c.m[d.id] = st
	return st
}
