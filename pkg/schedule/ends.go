package schedule

import "time"

// A job ends one of two ways: it succeeds, after a run whose length
// LearnedRun holds (the run times of the route's jobs that succeeded), or
// it does not — a validation or safety rejection, a failure, a cancel by
// the provider — at a time from acceptance that LearnedFailed holds, with
// the chance FailedShare. The end is a mixture of the two, and what the
// provider has reported conditions each part on its own clock: the
// success on the run (a queued job has not started it, a running one has
// run r of it), the failure on the time since acceptance. A rejection
// that comes within seconds of acceptance weighs on the first polls of a
// job and on nothing after them: once the job is past the failure
// times, the mixture is the run's alone and the cached plan of the run
// applies.
//
// While the failure part still weighs (at least failedNegligible of the
// mixture), the next poll is the first of the cost-optimal plan of the
// mixture's remaining time, solved at the decision on a grid of endsCells
// spanning what is left of the failure times and then twice MaxDelay.

// failedNegligible is the weight of the failure part below which a job's
// plan is the run's alone.
const failedNegligible = 1e-3

// endsCells is the size of the grid the mixture is planned on, and
// endsTail the share of the failure times beyond its horizon.
const (
	endsCells = 128
	endsTail  = 1e-3
)

// failedReady reports whether the job carries a learned failure part.
func (p Policy) failedReady(j *Job) bool {
	return j.FailedShare > 0 && j.LearnedFailed != nil && j.LearnedFailed.Weight() > 0
}

// endsDelay is the delay, in real time, before polling a job whose
// learned run times are ready, queued (planned as if it started now) or
// running for r seconds, while its failure part still weighs: the first
// poll of the cost-optimal plan of the mixture (see above). ok is false
// when there is no failure part or it no longer weighs.
func (p Policy) endsDelay(j *Job, r float64, queued bool) (d time.Duration, ok bool) {
	if !p.failedReady(j) {
		return 0, false
	}
	a := j.Now.Sub(j.Submitted).Seconds()
	if a < 0 {
		a = 0
	}
	pi := min(j.FailedShare, 1)
	fail := survivals.get(j.LearnedFailed)
	run := survivals.get(j.LearnedRun)
	if queued {
		r = 0
	}
	wf := pi * fail.at(a)
	ws := (1 - pi) * run.at(r)
	if !(wf > failedNegligible*(wf+ws)) {
		return 0, false
	}
	c := p.costs()
	horizon := max(fail.quantile(1-endsTail)-a, 0) + 2*c.maxGap
	step := max(horizon/endsCells, 1e-3)
	var s [endsCells]float64
	norm := wf + ws
	for i := range s {
		t := float64(i) * step
		s[i] = ((1-pi)*run.at(r+t) + pi*fail.at(a+t)) / norm
	}
	next := firstPoll(s[:], step, c)
	return seconds(min(max(float64(next)*step, c.minGap), c.maxGap)), true
}

// at is P(T > x), x in seconds.
func (st *survTable) at(x float64) float64 {
	if x <= 0 {
		return 1
	}
	return st.survival(binOf(x), x)
}

// quantile is the time, in seconds, below which a share q of the
// distribution lies, interpolated within its bin.
func (st *survTable) quantile(q float64) float64 {
	target := 1 - q // the share above
	for k := 0; k < bins; k++ {
		if st.tail[k+1] <= target {
			if st.w[k] <= 0 {
				return edges[k]
			}
			f := (st.tail[k] - target) / st.w[k]
			return edges[k] + f*(edges[k+1]-edges[k])
		}
	}
	return edges[bins]
}
