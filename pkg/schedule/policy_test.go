package schedule_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func rnd() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

// within runs the decision many times and checks every delay lies in [lo, hi].
func within(t *testing.T, p schedule.Policy, j schedule.Job, lo, hi time.Duration) {
	t.Helper()
	r := rnd()
	for range 500 {
		d := p.Next(j, r)
		require.GreaterOrEqual(t, d, lo)
		require.LessOrEqual(t, d, hi)
	}
}

func TestColdStartTable(t *testing.T) {
	t.Parallel()
	p := schedule.Policy{}
	tests := []struct {
		name     string
		expected time.Duration
		lo, hi   time.Duration
	}{
		{"preview first", 20 * time.Second, 2 * time.Second, 4 * time.Second},
		{"standard first", time.Minute, 4 * time.Second, 8 * time.Second},
		{"long first", 5 * time.Minute, 10 * time.Second, 20 * time.Second},
		{"very long first", time.Hour, 30 * time.Second, 60 * time.Second},
		{"unknown first", 0, 4 * time.Second, 6 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			within(t, p, schedule.Job{Now: t0, Submitted: t0, Expected: tt.expected}, tt.lo, tt.hi)
		})
	}
}

func TestBackoffWithinLaterBand(t *testing.T) {
	t.Parallel()
	p := schedule.Policy{}
	base := schedule.Job{Now: t0.Add(30 * time.Second), Submitted: t0, Expected: time.Minute, Polls: 3, Phase: schedule.PhaseRunning}

	// Standard row, later 10–20 s: 10 s after a change, doubling to 20 s.
	j := base
	j.Unchanged = 0
	within(t, p, j, 8*time.Second, 12*time.Second)
	j.Unchanged = 1
	within(t, p, j, 16*time.Second, 24*time.Second)
	j.Unchanged = 5
	within(t, p, j, 16*time.Second, 24*time.Second) // held in the band while young

	// Past twice the expected duration the backoff continues to MaxDelay.
	j.Now = t0.Add(3 * time.Minute)
	within(t, p, j, 48*time.Second, 72*time.Second)
	p.MaxDelay = 30 * time.Second
	within(t, p, j, 24*time.Second, 36*time.Second)
}

func TestUnknownBacksOffToMaxDelay(t *testing.T) {
	t.Parallel()
	p := schedule.Policy{}
	j := schedule.Job{Now: t0.Add(time.Minute), Submitted: t0, Polls: 1}
	within(t, p, j, 4*time.Second, 6*time.Second)
	j.Unchanged = 2
	within(t, p, j, 16*time.Second, 24*time.Second)
	j.Unchanged = 40 // no overflow
	within(t, p, j, 48*time.Second, 72*time.Second)
}

// MaxDelay bounds the wait for a job's first poll as well as the later
// ones: a route that tolerates 2s of delay is never left 5s unpolled.
func TestMaxDelayBoundsTheFirstPoll(t *testing.T) {
	t.Parallel()
	j := schedule.Job{Now: t0, Submitted: t0}
	within(t, schedule.Policy{}, j, 4*time.Second, 6*time.Second)
	within(t, schedule.Policy{MaxDelay: 2 * time.Second, MinDelay: 100 * time.Millisecond}, j, 1600*time.Millisecond, 2400*time.Millisecond)
}

func TestQueuedPollsSlowly(t *testing.T) {
	t.Parallel()
	j := schedule.Job{Now: t0.Add(10 * time.Second), Submitted: t0, Expected: time.Minute, Polls: 1, Phase: schedule.PhaseQueued}
	within(t, schedule.Policy{}, j, 16*time.Second, 24*time.Second)
}

func TestPollAfterIsAFloor(t *testing.T) {
	t.Parallel()
	j := schedule.Job{Now: t0, Submitted: t0, Expected: 20 * time.Second, PollAfter: 9 * time.Second}
	within(t, schedule.Policy{}, j, 9*time.Second, 9*time.Second)
}

func TestErrorsBackOff(t *testing.T) {
	t.Parallel()
	p := schedule.Policy{}
	j := schedule.Job{Now: t0, Submitted: t0, Expected: 20 * time.Second, Polls: 4, Errors: 1}
	within(t, p, j, 1600*time.Millisecond, 2400*time.Millisecond)
	j.Errors = 3
	within(t, p, j, 6400*time.Millisecond, 9600*time.Millisecond)
	j.Errors = 100
	within(t, p, j, 48*time.Second, 72*time.Second)
}

func TestWebhookExpectedWaitsThenReconciles(t *testing.T) {
	t.Parallel()
	p := schedule.Policy{}
	j := schedule.Job{Now: t0, Submitted: t0, Expected: 2 * time.Minute, WebhookExpected: true}
	// Quiet until expected + grace.
	within(t, p, j, 150*time.Second, 150*time.Second)
	j.Now = t0.Add(time.Minute)
	within(t, p, j, 90*time.Second, 90*time.Second)
	// Then slow reconciliation.
	j.Now, j.Polls = t0.Add(3*time.Minute), 1
	within(t, p, j, 48*time.Second, 72*time.Second)
	p.Reconcile = 5 * time.Minute
	within(t, p, j, 4*time.Minute, 6*time.Minute)
}

func TestNeverPastDeadline(t *testing.T) {
	t.Parallel()
	j := schedule.Job{Now: t0, Submitted: t0, Polls: 5, Unchanged: 5, Deadline: t0.Add(3 * time.Second)}
	within(t, schedule.Policy{}, j, 3*time.Second, 3*time.Second)
	j.Deadline = t0.Add(-time.Second) // already past: check now
	within(t, schedule.Policy{}, j, 0, 0)
}

func TestScaleCompressesModelTime(t *testing.T) {
	t.Parallel()
	p := schedule.Policy{Scale: 20}
	// Preview first poll 2–4 s model time → 100–200 ms real.
	within(t, p, schedule.Job{Now: t0, Submitted: t0, Expected: time.Second}, 100*time.Millisecond, 200*time.Millisecond)
	// Expected durations are real: 1 s real at scale 20 is 20 s model time,
	// the preview row; 4 s real is 80 s model time, the standard row.
	within(t, p, schedule.Job{Now: t0, Submitted: t0, Expected: 4 * time.Second}, 200*time.Millisecond, 400*time.Millisecond)
}

func TestFloorsAndJitterProperties(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 7))
	p := schedule.Policy{MinDelay: 3 * time.Second, Jitter: 0.3}
	for range 5000 {
		j := schedule.Job{
			Now:             t0.Add(time.Duration(r.IntN(3600)) * time.Second),
			Submitted:       t0,
			Phase:           schedule.Phase(r.IntN(3)),
			Polls:           r.IntN(50),
			Unchanged:       r.IntN(50),
			Expected:        time.Duration(r.IntN(1200)) * time.Second,
			PollAfter:       time.Duration(r.IntN(10)) * time.Second,
			WebhookExpected: r.IntN(4) == 0,
			Errors:          r.IntN(3),
		}
		if r.IntN(2) == 0 {
			j.Deadline = j.Now.Add(time.Duration(r.IntN(7200)) * time.Second)
		}
		d := p.Next(j, r)
		if !j.Deadline.IsZero() {
			require.LessOrEqual(t, d, j.Deadline.Sub(j.Now), "never past the deadline")
		}
		left := j.Deadline.Sub(j.Now)
		if j.Deadline.IsZero() || left >= 3*time.Second {
			require.GreaterOrEqual(t, d, 3*time.Second, "never below the floor")
		}
		if j.Deadline.IsZero() || left >= j.PollAfter {
			require.GreaterOrEqual(t, d, j.PollAfter, "the provider's hint is a floor")
		}
	}
}

func ExamplePolicy_Next() {
	p := schedule.Policy{Jitter: 0.2}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	job := schedule.Job{Now: now, Submitted: now, Expected: 90 * time.Second}
	first := p.Next(job, rand.New(rand.NewPCG(1, 1)))
	fmt.Println(first >= 4*time.Second && first <= 8*time.Second)
	// Output: true
}

// MaxDelay is a hard cap on every gap, whatever proposes a longer one: the
// cold-start table's first poll and bands, the jitter, an estimate of the
// time left, the error backoff, a provider's poll-after hint. Only a job
// expecting a webhook (and no failing calls) waits longer, as designed.
// Jobs held at the cap are still spread over its top Jitter.
func TestMaxDelayCapsEveryGap(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(11, 12))
	learnedDist := func(mean time.Duration) *schedule.Dist {
		var d schedule.Dist
		for i := range 40 {
			d.Observe(mean/2 + time.Duration(i)*mean/40)
		}
		return &d
	}
	for range 20000 {
		p := schedule.Policy{
			MaxDelay: time.Duration(1+r.IntN(600)) * time.Second,
			Jitter:   []float64{0.05, 0.2, 0.5}[r.IntN(3)],
			Scale:    []float64{1, 1, 20}[r.IntN(3)],
		}
		j := schedule.Job{
			Now:           t0.Add(time.Duration(r.IntN(7200)) * time.Second),
			Submitted:     t0,
			Phase:         schedule.Phase(r.IntN(3)),
			Polls:         r.IntN(40),
			Unchanged:     r.IntN(40),
			Expected:      []time.Duration{0, 10 * time.Second, 90 * time.Second, 5 * time.Minute, time.Hour}[r.IntN(5)],
			PollAfter:     []time.Duration{0, 0, 5 * time.Second, 2 * time.Hour}[r.IntN(4)],
			Errors:        []int{0, 0, 0, 3, 20}[r.IntN(5)],
			Progress:      []float64{0, 0, 0.01, 0.5}[r.IntN(4)],
			ETA:           []time.Duration{0, 0, 3 * time.Hour}[r.IntN(3)],
			QueuePosition: r.IntN(200),
			QueueRate:     []float64{0, 0.001}[r.IntN(2)],
		}
		if r.IntN(3) == 0 {
			j.Learned = learnedDist(time.Duration(1+r.IntN(3600)) * time.Second)
		}
		if !j.Now.After(j.Submitted) && j.Progress > 0 {
			j.Now = j.Now.Add(time.Second)
		}
		limit := time.Duration(float64(p.MaxDelay) / p.Scale)
		d := p.Next(j, r)
		require.LessOrEqual(t, d, max(limit, 50*time.Millisecond), "MaxDelay %s at scale %g: %+v", p.MaxDelay, p.Scale, j)
	}

	// Held at the cap, still spread.
	p := schedule.Policy{MaxDelay: 10 * time.Second}
	seen := map[time.Duration]bool{}
	lo := time.Hour
	for range 200 {
		d := p.Next(schedule.Job{Now: t0, Submitted: t0, Expected: time.Hour}, r) // first poll 30–60 s by the table
		require.LessOrEqual(t, d, 10*time.Second)
		seen[d] = true
		lo = min(lo, d)
	}
	require.Greater(t, len(seen), 150, "capped delays are spread, not one value")
	require.Less(t, lo, 8500*time.Millisecond, "spread over the cap's top Jitter")
}

// Every delay the policy decides on its own is spread by ±Jitter, so a
// fleet that started many jobs at once does not poll them in lockstep: the
// cold start's backoff, an error's backoff, a webhook job's reconciliation
// and an estimate of the time left.
func TestPolicySpreadsEveryDelay(t *testing.T) {
	t.Parallel()
	p := schedule.Policy{Jitter: 0.2}
	for name, tc := range map[string]struct {
		job  schedule.Job
		base time.Duration
	}{
		"cold start, unknown duration": {schedule.Job{Now: t0.Add(time.Minute), Submitted: t0, Polls: 2, Unchanged: 2}, 20 * time.Second},
		"cold start, standard row":     {schedule.Job{Now: t0.Add(20 * time.Second), Submitted: t0, Polls: 2, Unchanged: 0, Expected: 90 * time.Second}, 10 * time.Second},
		"a failing call":               {schedule.Job{Now: t0.Add(time.Minute), Submitted: t0, Polls: 2, Errors: 2}, 4 * time.Second},
		"reconciling a webhook job":    {schedule.Job{Now: t0.Add(time.Hour), Submitted: t0, Polls: 2, WebhookExpected: true, Expected: time.Minute}, time.Minute},
	} {
		r := rnd()
		lo, hi := time.Duration(1<<62), time.Duration(0)
		for range 500 {
			d := p.Next(tc.job, r)
			lo, hi = min(lo, d), max(hi, d)
		}
		require.Less(t, lo, time.Duration(float64(tc.base)*0.9), name+": spread below the base")
		require.Greater(t, hi, time.Duration(float64(tc.base)*1.1), name+": spread above the base")
		require.GreaterOrEqual(t, lo, time.Duration(float64(tc.base)*0.8), name+": within -Jitter")
		require.LessOrEqual(t, hi, time.Duration(float64(tc.base)*1.2), name+": within +Jitter")
	}
}

// Until MinSamples are learned the schedule follows the cold-start table:
// UsesLearned says which, and ColdTimes are the table's polls, each at
// the middle of its jitter.
func TestColdTimesAndUsesLearned(t *testing.T) {
	t.Parallel()
	p := schedule.Policy{}
	var d schedule.Dist
	require.False(t, p.UsesLearned(nil))
	d.Observe(10 * time.Second)
	for {
		require.False(t, p.UsesLearned(&d), "below 20 samples: the cold start")
		if d.Observe(10 * time.Second); d.Weight() >= schedule.DefaultMinSamples {
			break
		}
	}
	require.True(t, p.UsesLearned(&d), "20 samples: learned")
	require.False(t, schedule.Policy{MinSamples: 50}.UsesLearned(&d), "a route's own threshold")

	s := time.Second
	require.Equal(t, []time.Duration{5 * s, 10 * s, 20 * s, 40 * s, 80 * s, 140 * s, 200 * s}, p.ColdTimes(0, 3*time.Minute, 3),
		"no hint: 5 s, doubling after the first poll's change, to MaxDelay")
	require.Equal(t, []time.Duration{6 * s, 16 * s, 36 * s, 56 * s, 76 * s, 96 * s}, p.ColdTimes(time.Minute, 80*s, 0),
		"the standard row: 4-8 s, then 10-20 s while young")
	require.Len(t, p.ColdTimes(0, 0, 0), 1)
	require.Len(t, p.ColdTimes(0, time.Second, 12), 12, "at least n")
}
