package schedule

import (
	"math"
	"time"
)

// A job ends one of two ways: it succeeds, after a run whose length
// LearnedRun holds (the run times of the route's jobs that succeeded), or
// it does not — a validation or safety rejection, a failure minutes into
// the run, a cancel by the provider — at a time from acceptance that
// LearnedFailed holds, with the chance FailedShare. The end is a mixture
// of the two, and what the provider has reported conditions each part on
// its own clock: the success on the run (a queued job has not started it,
// a running one has run r of it), the failure on the time since
// acceptance. A rejection that comes within seconds of acceptance weighs
// on the first polls of a job and on nothing after them: once the job is
// past the failure times, the mixture is the run's alone and the plan of
// the run applies.
//
// For a job that started q after its acceptance (a queued one is planned
// as if it started now, q its age), the two clocks differ by q alone, so
// its end, on its run's clock, is the distribution
//
//	M_q(x) = (1 − share)·S_run(x) + share·S_failed(q + x)
//
// and its next poll is that of M_q's cost-optimal plan after a poll at
// its run so far: the plan is the same for every job of the model that
// waited as long, and is cached like any Plan. q is rounded to a quarter
// of an octave (endsShiftSteps), so a model has a few dozen such plans
// however long its queue, each built once (0.1–0.3 ms) where the decision
// solved the mixture on a coarse grid of its own every time (18 µs, on
// 128 cells: failures spread over a run of minutes weigh at every
// decision, and a queue of minutes spread the grid to 7 s a cell).

// failedNegligible is the weight of the failure part below which a job's
// plan is the run's alone.
const failedNegligible = 1e-3

// endsShiftSteps is how finely a job's time to its start (q above) is
// rounded: to 1/endsShiftSteps of an octave; below endsShiftFloor seconds
// it is 0.
const (
	endsShiftSteps = 4
	endsShiftFloor = 0.5
)

// failedReady reports whether the job carries a learned failure part.
func (p Policy) failedReady(j *Job) bool {
	return j.FailedShare > 0 && j.LearnedFailed != nil && j.LearnedFailed.Weight() > 0
}

// endsDelay is the delay, in real time, before polling a job whose
// learned run times are ready, queued (planned as if it started now) or
// running for r seconds, while its failure part still weighs: the next
// poll of the cost-optimal plan of the mixture (see above). ok is false
// when there is no failure part or it no longer weighs.
func (p Policy) endsDelay(j *Job, r float64, queued bool) (d time.Duration, ok bool) {
	if !p.failedReady(j) {
		return 0, false
	}
	a := max(j.Now.Sub(j.Submitted).Seconds(), 0)
	if queued {
		r = 0
	}
	r = min(max(r, 0), a)
	pi := min(j.FailedShare, 1)
	wf := pi * survivals.get(j.LearnedFailed).at(a)
	ws := (1 - pi) * survivals.get(j.LearnedRun).at(r)
	if !(wf > failedNegligible*(wf+ws)) {
		return 0, false
	}
	return p.endsPlan(j.LearnedRun, j.LearnedFailed, pi, a-r).Delay(seconds(r)), true
}

// endsPlan is the plan of M_q (see above), from the policy's plan cache.
func (p Policy) endsPlan(run, failed *Dist, share, q float64) *Plan {
	c := p.costs()
	share = math.Round(min(max(share, 0), 1)*1000) / 1000
	if q < endsShiftFloor {
		q = 0
	} else {
		q = math.Exp2(math.Round(endsShiftSteps*math.Log2(q)) / endsShiftSteps)
	}
	key := planKey{dist: run.id, cost: seconds(c.cost), minGap: seconds(c.minGap), maxGap: seconds(c.maxGap),
		failed: failed.id, share: int32(share * 1000), shift: seconds(q)}
	if pl := plans.get(key); pl != nil {
		return pl
	}
	rt, ft := survivals.get(run), survivals.get(failed)
	step, n := grid(max(rt.quantile(1-tailMass), ft.quantile(1-tailMass)-q, c.maxGap), c)
	s := make([]float64, n)
	s0 := (1 - share) + share*ft.at(q)
	for i := range s {
		x := float64(i) * step
		s[i] = ((1-share)*rt.at(x) + share*ft.at(q+x)) / s0
	}
	pl := solve(s, step, c, nil)
	plans.put(key, pl)
	return pl
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
