package learn

import (
	"math"
	"time"

	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// How a model's jobs end: of those that ended on their own (what
// Durations keeps), the share that did not succeed — rejected by a
// validation or safety check, failed, canceled by the provider — and when,
// from acceptance. A model's record keeps it under Ends (model level);
// its Run then learns from the jobs that succeeded alone, and the schedule
// plans a job's end as the mixture of the two, each part conditioned on
// what the provider reported (schedule.Job.LearnedFailed): a long model's
// rejections, seconds after acceptance, cost polls in a job's first
// seconds and none once it is queued past them or running. Records
// written before Ends existed decode without it, and their Run, which
// holds every end, is planned as before until Ends is learned.

// Ends is how a model's jobs end, in the stats bucket.
type Ends struct {
	// Jobs and Failed are the jobs that ended on their own and those of
	// them that did not succeed, decaying by endsHalfLife jobs.
	Jobs   float64 `json:"jobs"`
	Failed float64 `json:"failed"`
	// Times are the not-succeeded jobs' times from acceptance to their
	// end, and Succeeded the others', each decaying like any Dist.
	Times     schedule.Dist `json:"times"`
	Succeeded schedule.Dist `json:"succeeded"`
}

// endsHalfLife is the number of jobs after which one weighs half in the
// failure share: long enough to tell 5 % from 3 % on a few hundred jobs.
const endsHalfLife = 500

var endsDecay = math.Exp2(-1.0 / endsHalfLife)

// Observe records one job that ended on its own after total, succeeded or
// not.
func (e *Ends) Observe(total time.Duration, succeeded bool) {
	e.Jobs = e.Jobs*endsDecay + 1
	e.Failed *= endsDecay
	if !succeeded {
		e.Failed++
		e.Times.Observe(total)
		return
	}
	e.Succeeded.Observe(total)
}

// Total is the distribution of the times from acceptance to the end of
// every job: the succeeded and the others' mixed by the share, which
// rests on far more jobs than a Dist's few dozen effective samples hold —
// a 5 % of rejections is 3 or 4 of them, often 0 or 1. Nil before a
// failure is seen or while the succeeded jobs weigh less than
// schedule.DefaultMinSamples (a record written before Ends existed keeps
// its Total until then).
func (e *Ends) Total() *schedule.Dist {
	if e == nil || e.Failed <= 0 || e.Succeeded.Weight() < schedule.DefaultMinSamples {
		return nil
	}
	return e.Succeeded.Mixed(&e.Times, e.Share())
}

// Share is the share of the jobs that did not succeed; 0 before any job.
func (e *Ends) Share() float64 {
	if e == nil || e.Jobs <= 0 {
		return 0
	}
	return e.Failed / e.Jobs
}

// Failed returns how the model's jobs end on the route: the times from
// acceptance of those that did not succeed, and their share; nil and 0
// when not learned (schedule.Job.LearnedFailed, FailedShare). They must
// not be modified.
func (s *Stats) Failed(route, model string) (times *schedule.Dist, share float64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sn := s.dist[Key(route, model, "")]
	if sn.ends == nil || sn.ends.Failed <= 0 {
		return nil, 0
	}
	return &sn.ends.Times, sn.ends.Share()
}

// succeeded reports whether a finished job's end was a success.
func succeeded(j *state.Job) bool { return j.State == state.Succeeded }
