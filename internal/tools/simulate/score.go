package simulate

import (
	"math"
	"slices"
)

// Score is one strategy's figures on one model's scored jobs.
type Score struct {
	// Strategy and Model name what is scored.
	Strategy string `json:"strategy"`
	Model    string `json:"model"`
	// Knob is the strategy's setting: the poll cost in seconds for
	// adaptive and optimal, the factor on its delays for the others.
	Knob float64 `json:"knob"`
	// Jobs is the number of jobs scored.
	Jobs int `json:"jobs"`
	// PollsPerJob counts status calls per job, the one that saw it
	// terminal included.
	PollsPerJob float64 `json:"polls_per_job"`
	// MeanDelayS … P99DelayS are the detection delays, from the terminal
	// state to the poll that saw it, in seconds (nearest rank).
	MeanDelayS float64 `json:"mean_delay_s"`
	P50DelayS  float64 `json:"p50_delay_s"`
	P95DelayS  float64 `json:"p95_delay_s"`
	P99DelayS  float64 `json:"p99_delay_s"`
	// OptimalPolls is the optimal frontier's polls per job at the same mean
	// delay, and Ratio is PollsPerJob over it; both are null when the
	// mean delay is outside the frontier's reach (below the MinDelay floor
	// or above what MaxDelay allows).
	OptimalPolls *float64 `json:"optimal_polls_at_same_mean_delay"`
	Ratio        *float64 `json:"ratio"`
}

// score computes a strategy's figures on each model's scored jobs.
func (r *run) score(s Strategy, knobs []float64, out outcome) []Score {
	scores := make([]Score, len(r.models))
	delays := make([]float64, 0, len(r.jobs))
	for m, md := range r.models {
		sc := Score{Strategy: s.Name, Model: md.name, Knob: knobs[m]}
		delays = sc.figures(md.scored, out, delays)
		scores[m] = sc
	}
	return scores
}

// figures fills in the score of the jobs at indexes scored; delays is
// scratch space, returned for reuse.
func (sc *Score) figures(scored []int, out outcome, delays []float64) []float64 {
	sc.Jobs = len(scored)
	delays = delays[:0]
	polls := 0.0
	for _, i := range scored {
		polls += float64(out.polls[i])
		delays = append(delays, out.delay[i])
	}
	if n := float64(len(delays)); n > 0 {
		slices.Sort(delays)
		sum := 0.0
		for _, d := range delays {
			sum += d
		}
		sc.PollsPerJob, sc.MeanDelayS = polls/n, sum/n
		sc.P50DelayS, sc.P95DelayS, sc.P99DelayS = rank(delays, 0.50), rank(delays, 0.95), rank(delays, 0.99)
	}
	return delays
}

// rank returns the q-quantile of sorted xs by nearest rank.
func rank(xs []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// Point is one setting of a strategy on one model: its knob (as in Score)
// and what it scored.
type Point struct {
	Knob       float64 `json:"knob"`
	Polls      float64 `json:"polls_per_job"`
	MeanDelayS float64 `json:"mean_delay_s"`
	P95DelayS  float64 `json:"p95_delay_s"`
}

func pointOf(sc Score) Point {
	return Point{Knob: sc.Knob, Polls: sc.PollsPerJob, MeanDelayS: sc.MeanDelayS, P95DelayS: sc.P95DelayS}
}

// frontier is the lower convex hull of the optimal plans' points, polls
// against mean delay: the fewest polls per job any schedule without
// per-job signals needs for a mean delay, mixing two plans in between.
type frontier []Point

// newFrontier keeps the points on the lower convex hull, by rising delay
// and falling polls.
func newFrontier(pts []Point) frontier {
	pts = slices.Clone(pts)
	slices.SortFunc(pts, func(a, b Point) int {
		if a.MeanDelayS != b.MeanDelayS {
			return cmpFloat(a.MeanDelayS, b.MeanDelayS)
		}
		return cmpFloat(a.Polls, b.Polls)
	})
	var h frontier
	for _, p := range pts {
		if len(h) > 0 && p.Polls >= h[len(h)-1].Polls {
			continue // more delay, no fewer polls: dominated
		}
		for len(h) >= 2 && cross(h[len(h)-2], h[len(h)-1], p) <= 0 {
			h = h[:len(h)-1]
		}
		h = append(h, p)
	}
	return h
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cross is the z of (b−a)×(c−a): positive when a, b, c turn left, as the
// points of a lower hull do.
func cross(a, b, c Point) float64 {
	return (b.MeanDelayS-a.MeanDelayS)*(c.Polls-a.Polls) - (b.Polls-a.Polls)*(c.MeanDelayS-a.MeanDelayS)
}

// endSlack is how far (relatively) beyond its ends the frontier is taken
// to be flat: a fixed 1 s poller's mean delay is MinDelay/2 give or take
// the sampling noise, like the frontier's most eager point.
const endSlack = 0.01

// at returns the frontier's polls per job at a mean delay, false outside
// its span.
func (f frontier) at(delay float64) (float64, bool) {
	if len(f) == 0 || delay < f[0].MeanDelayS*(1-endSlack) || delay > f[len(f)-1].MeanDelayS*(1+endSlack) {
		return 0, false
	}
	delay = min(max(delay, f[0].MeanDelayS), f[len(f)-1].MeanDelayS)
	i, _ := slices.BinarySearchFunc(f, delay, func(p Point, d float64) int { return cmpFloat(p.MeanDelayS, d) })
	if f[i].MeanDelayS == delay {
		return f[i].Polls, true
	}
	a, b := f[i-1], f[i]
	t := (delay - a.MeanDelayS) / (b.MeanDelayS - a.MeanDelayS)
	return a.Polls + t*(b.Polls-a.Polls), true
}

// compare fills in the score's comparison with the frontier.
func (f frontier) compare(sc *Score) {
	if opt, ok := f.at(sc.MeanDelayS); ok && opt > 0 {
		ratio := sc.PollsPerJob / opt
		sc.OptimalPolls, sc.Ratio = &opt, &ratio
	}
}
