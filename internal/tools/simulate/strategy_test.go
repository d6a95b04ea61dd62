package simulate

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

func TestParseStrategy(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"adaptive", FixedQuietName, "seed-table", "google", "smithy", "optimal", PopulationName, "fixed:1", "fixed:0.5"} {
		s, err := ParseStrategy(name)
		require.NoError(t, err)
		require.Equal(t, name, s.Name)
	}
	s, err := ParseStrategy("fixed:10.0")
	require.NoError(t, err)
	require.Equal(t, "fixed:10", s.Name)
	require.Equal(t, 10.0, s.every)
	for _, bad := range []string{"", "fast", "fixed:", "fixed:0", "fixed:-1", "fixed:x", "fixed:Inf", "fixed:NaN"} {
		_, err := ParseStrategy(bad)
		require.Error(t, err, bad)
	}
	require.Len(t, DefaultStrategies(), 7)
}

// oneModel is a run of jobs of one model, far apart, with no warm-up.
func oneModel(durations ...float64) *run {
	jobs := make([]Job, len(durations))
	for i, d := range durations {
		jobs[i] = Job{Model: "m", Submit: float64(i) * 1000, Duration: d, Outcome: "succeeded"}
	}
	r, _ := newRun(jobs, Config{}.withDefaults())
	return r
}

func TestFixedPollsOnItsGrid(t *testing.T) {
	t.Parallel()
	r := oneModel(0.5, 9.99, 10, 10.01, 95.3)
	s, _ := ParseStrategy("fixed:10")
	out := r.simulate(s, r.same(1))
	require.Equal(t, []int32{1, 1, 1, 2, 10}, out.polls)
	for i, d := range []float64{9.5, 0.01, 0, 9.99, 4.7} {
		require.InDelta(t, d, out.delay[i], 1e-9)
	}
	out = r.simulate(s, r.same(2)) // the factor stretches the interval
	require.Equal(t, []int32{1, 1, 1, 1, 5}, out.polls)
}

// delays returns a backoff strategy's n-th delays over many draws.
func delays(t *testing.T, name string, n int32) []float64 {
	t.Helper()
	s, err := ParseStrategy(name)
	require.NoError(t, err)
	r := oneModel(1)
	p := r.newPoller(s, r.same(1), []*rand.Rand{rand.New(rand.NewPCG(1, 2))})
	ds := make([]float64, 20000)
	for i := range ds {
		ds[i] = p.next(0, &jobState{polls: n}, 0)
	}
	return ds
}

func TestGoogleIsFullJitterBackoff(t *testing.T) {
	t.Parallel()
	for n, hi := range []float64{1, 1.5, 2.25, 3.375, 5.0625, 7.59375, 11.390625, 17.0859375, 20, 20} {
		ds := delays(t, "google", int32(n))
		lo, top, sum := math.Inf(1), 0.0, 0.0
		for _, d := range ds {
			lo, top, sum = min(lo, d), max(top, d), sum+d
		}
		require.GreaterOrEqual(t, lo, 0.0)
		require.Less(t, lo, hi*0.01, "full jitter reaches down to 0")
		require.LessOrEqual(t, top, hi)
		require.Greater(t, top, hi*0.99)
		require.InEpsilon(t, hi/2, sum/float64(len(ds)), 0.03, "uniform")
	}
}

func TestSmithyIsTheWaiterBackoff(t *testing.T) {
	t.Parallel()
	// The spec: attempt ceiling ⌊log2(120/2)+1⌋ = 6; delay uniform in
	// [2, 2·2^(attempt−1)], [2, 120] past the ceiling.
	require.EqualValues(t, 6, smithyCeiling)
	for polls, hi := range []float64{2, 4, 8, 16, 32, 64, 120, 120} {
		ds := delays(t, "smithy", int32(polls))
		lo, top := math.Inf(1), 0.0
		for _, d := range ds {
			lo, top = min(lo, d), max(top, d)
		}
		require.GreaterOrEqual(t, lo, 2.0)
		require.Less(t, lo, 2+0.01*hi)
		require.LessOrEqual(t, top, hi)
		require.Greater(t, top, hi*0.99)
	}
}

func TestSeedTableIsThePolicyColdStart(t *testing.T) {
	t.Parallel()
	r := oneModel(30, 60, 90)
	s, _ := ParseStrategy("seed-table")
	p := r.newPoller(s, r.same(1), []*rand.Rand{rand.New(rand.NewPCG(9, 9))})
	mirror := rand.New(rand.NewPCG(9, 9))
	policy := schedule.Policy{}
	for polls := range int32(8) {
		st := &jobState{polls: polls, unchanged: polls / 2, phase: schedule.PhaseRunning}
		got := p.next(1, st, 1000+float64(polls)*7)
		want := policy.Next(schedule.Job{
			Now: at(1000 + float64(polls)*7), Submitted: at(1000), Phase: schedule.PhaseRunning,
			Polls: int(polls), Unchanged: int(polls / 2), Expected: dur(60),
		}, mirror)
		require.InDelta(t, want.Seconds(), got, 1e-9)
	}
}

func TestOptimalFollowsThePlanOfTheTruth(t *testing.T) {
	t.Parallel()
	r := oneModel(50, 60, 70, 80, 90, 100, 110)
	s, _ := ParseStrategy("optimal")
	p := r.newPoller(s, r.same(2), nil)
	plan := r.models[0].plan(schedule.Policy{PollCost: dur(2)})
	for _, elapsed := range []float64{0, 10, 49, 55, 71, 200} {
		require.Equal(t, secs(plan.Delay(dur(elapsed))), p.next(3, &jobState{polls: 1}, 3000+elapsed))
	}
	require.Equal(t, 1.0, r.models[0].survival(0))
	require.InDelta(t, 4.0/7, r.models[0].survival(dur(70)), 1e-12, "P(T > 70)")
	require.Zero(t, r.models[0].survival(dur(110)))
}

// adaptive hands the policy what the provider reported of a running job:
// its start and its progress; seed-table, the cold start, neither.
func TestAdaptiveIsGivenProgress(t *testing.T) {
	t.Parallel()
	r := mustRun(t, []Job{{Model: "m", Submit: 100, Queue: 5, Duration: 125, Outcome: "succeeded", ProgressStep: 0.05}}, Config{}.withDefaults())
	st := &jobState{polls: 2, phase: schedule.PhaseRunning, progress: 0.4}
	policy := schedule.Policy{}
	for _, tc := range []struct {
		name string
		sj   schedule.Job
	}{
		{"adaptive", schedule.Job{Now: at(113), Submitted: at(100), Phase: schedule.PhaseRunning, Polls: 2, Expected: dur(125),
			StartedAt: at(105), Progress: 0.4, Learned: &schedule.Dist{}, LearnedRun: &schedule.Dist{}}},
		{"seed-table", schedule.Job{Now: at(113), Submitted: at(100), Phase: schedule.PhaseRunning, Polls: 2, Expected: dur(125)}},
	} {
		s, _ := ParseStrategy(tc.name)
		p := r.newPoller(s, r.same(r.cfg.knob(s)), []*rand.Rand{rand.New(rand.NewPCG(3, 3))})
		want := policy.Next(tc.sj, rand.New(rand.NewPCG(3, 3)))
		require.InDelta(t, want.Seconds(), p.next(0, st, 113), 1e-9, tc.name)
	}
	// 8 s run, 40% done: about 12 s left, polled around it.
	s, _ := ParseStrategy("adaptive")
	p := r.newPoller(s, r.same(2), []*rand.Rand{rand.New(rand.NewPCG(3, 3))})
	require.InDelta(t, 12, p.next(0, st, 113), 4)
}
