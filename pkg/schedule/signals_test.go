package schedule_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

// Learned distributions shared by the tests: total durations around 90 s,
// run times around 80 s, and one with too few samples to be used.
var (
	total = learned(90, 0.5, 400, 11)
	run   = learned(80, 0.3, 400, 12)
	young = learned(90, 0.5, 10, 13)
)

// around is where the default policy polls a job believed to end in
// left ± 25%: the window's start plus √(width·PollCost), capped at its
// end, within [MinDelay, MaxDelay].
func around(left time.Duration, pollCost time.Duration) time.Duration {
	x := left.Seconds()
	lo, w := 0.75*x, 0.5*x
	return min(max(secs(lo+min(math.Sqrt(w*pollCost.Seconds()), w)), time.Second), time.Minute)
}

func TestSignals(t *testing.T) {
	t.Parallel()
	p := schedule.Policy{}.WithDefaults()
	now := t0.Add(40 * time.Second)
	plan := func(d *schedule.Dist, at time.Duration) time.Duration { return p.Plan(d).Delay(at) }
	// jittered: ±20%; later: planned polls ±10%, not past MaxDelay.
	jittered := func(d time.Duration) [2]time.Duration { return [2]time.Duration{d * 8 / 10, d * 12 / 10} }
	later := func(d time.Duration) [2]time.Duration {
		return [2]time.Duration{d * 9 / 10, max(min(d*11/10, time.Minute), d)}
	}
	tests := []struct {
		name  string
		job   schedule.Job
		delay [2]time.Duration
	}{
		{"learned: the plan from the elapsed time",
			schedule.Job{Polls: 2, Phase: schedule.PhaseRunning, Learned: total},
			later(plan(total, 40*time.Second))},
		{"learned: first poll",
			schedule.Job{Now: t0, Learned: total},
			later(plan(total, 0))},
		{"learned, too few samples: the cold-start table",
			schedule.Job{Now: t0, Expected: time.Minute, Learned: young},
			[2]time.Duration{4 * time.Second, 8 * time.Second}},
		{"learned run times: the run plan from the start",
			schedule.Job{Polls: 2, Phase: schedule.PhaseRunning, Learned: total, LearnedRun: run, StartedAt: t0.Add(25 * time.Second)},
			later(plan(run, 15*time.Second))},
		{"learned run times, start unknown: the total plan",
			schedule.Job{Polls: 2, Phase: schedule.PhaseRunning, Learned: total, LearnedRun: run},
			later(plan(total, 40*time.Second))},
		{"queued, learned run times: as if it started now",
			schedule.Job{Polls: 2, Phase: schedule.PhaseQueued, Learned: total, LearnedRun: run},
			later(plan(run, 0))},
		{"queued, learned total: as if submitted now",
			schedule.Job{Polls: 2, Phase: schedule.PhaseQueued, Learned: total},
			later(plan(total, 0))},
		{"queued, cold: the row's slow end",
			schedule.Job{Polls: 1, Phase: schedule.PhaseQueued, Expected: time.Minute},
			jittered(20 * time.Second)},
		{"ETA",
			schedule.Job{Polls: 3, Learned: total, ETA: 40 * time.Second},
			jittered(around(40*time.Second, p.PollCost))},
		{"ETA beyond MaxDelay: MaxDelay",
			schedule.Job{Polls: 3, ETA: 10 * time.Minute},
			jittered(time.Minute)},
		{"ETA nearly done: MinDelay",
			schedule.Job{Polls: 3, ETA: 500 * time.Millisecond},
			[2]time.Duration{time.Second, time.Second * 12 / 10}},
		{"progress from the start",
			schedule.Job{Polls: 3, Learned: total, Progress: 0.5, StartedAt: t0.Add(10 * time.Second)},
			jittered(around(30*time.Second, p.PollCost))},
		{"progress, start unknown: from the submission",
			schedule.Job{Polls: 3, Progress: 0.8},
			jittered(around(10*time.Second, p.PollCost))},
		{"queue position and rate",
			schedule.Job{Polls: 3, Phase: schedule.PhaseQueued, QueuePosition: 10, QueueRate: 0.5},
			jittered(around(20*time.Second, p.PollCost))},
		{"queue position and rate, learned run time added",
			schedule.Job{Polls: 3, Phase: schedule.PhaseQueued, QueuePosition: 10, QueueRate: 0.5, LearnedRun: run},
			jittered(around(20*time.Second+run.Quantile(0.5), p.PollCost))},
		{"queue position without a rate: ignored",
			schedule.Job{Polls: 2, Phase: schedule.PhaseQueued, QueuePosition: 3, Learned: total, LearnedRun: run},
			later(plan(run, 0))},
		{"poll-after hint is a floor under the plan",
			schedule.Job{Polls: 2, Learned: total, PollAfter: 50 * time.Second},
			[2]time.Duration{50 * time.Second, 50 * time.Second}},
		{"a poll-after hint is honoured within MaxDelay",
			schedule.Job{Polls: 2, Learned: total, PollAfter: 10 * time.Minute},
			[2]time.Duration{48 * time.Second, time.Minute}},
		{"deadline cuts the plan short",
			schedule.Job{Polls: 2, Learned: total, Deadline: now.Add(2 * time.Second)},
			[2]time.Duration{2 * time.Second, 2 * time.Second}},
		{"errors override the plan",
			schedule.Job{Polls: 2, Learned: total, Errors: 2},
			jittered(4 * time.Second)},
		{"webhook, learned: quiet until the 90th percentile plus the grace",
			schedule.Job{WebhookExpected: true, Learned: total, Expected: time.Minute},
			[2]time.Duration{total.Quantile(0.9) + 30*time.Second - 40*time.Second, total.Quantile(0.9) + 30*time.Second - 40*time.Second}},
		{"webhook, learned, past the quiet time: reconciliation",
			schedule.Job{WebhookExpected: true, Learned: total, Now: t0.Add(10 * time.Minute), Polls: 1},
			jittered(time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := tt.job
			j.Submitted = t0
			if j.Now.IsZero() {
				j.Now = now
			}
			within(t, p, j, tt.delay[0], tt.delay[1])
		})
	}
}

// A planned poll is jittered around the plan's time, ±Jitter/2: on
// average the plan's gap, not a tenth longer (jittered later only, every
// gap stretched and the delays' tail with it: mixed/fast's p95 past the
// cold-start table's).
func TestPlannedJitterIsCentred(t *testing.T) {
	t.Parallel()
	p := schedule.Policy{}
	j := schedule.Job{Now: t0.Add(50 * time.Second), Submitted: t0, Polls: 3, Learned: total}
	want := p.Plan(total).Delay(50 * time.Second)
	r := rnd()
	var lo, hi, sum time.Duration = math.MaxInt64, 0, 0
	const n = 4000
	for range n {
		d := p.Next(j, r)
		lo, hi, sum = min(lo, d), max(hi, d), sum+d
	}
	require.GreaterOrEqual(t, lo, want*9/10)
	require.Less(t, lo, want*92/100, "spread over the band")
	require.LessOrEqual(t, hi, want*11/10)
	require.Greater(t, hi, want*108/100)
	require.InDelta(t, want.Seconds(), (sum / n).Seconds(), 0.01*want.Seconds(), "centred on the plan")
}

// randomJob draws a job with every signal sometimes present.
func randomJob(r *rand.Rand) schedule.Job {
	dists := []*schedule.Dist{nil, total, run, young}
	j := schedule.Job{
		Now:             t0.Add(time.Duration(r.IntN(3600)) * time.Second),
		Submitted:       t0,
		Phase:           schedule.Phase(r.IntN(3)),
		Polls:           r.IntN(50),
		Unchanged:       r.IntN(50),
		Expected:        time.Duration(r.IntN(1200)) * time.Second,
		PollAfter:       time.Duration(r.IntN(10)) * time.Second,
		WebhookExpected: r.IntN(5) == 0,
		Errors:          max(0, r.IntN(6)-3),
		Learned:         dists[r.IntN(len(dists))],
		LearnedRun:      dists[r.IntN(len(dists))],
	}
	if r.IntN(2) == 0 {
		j.StartedAt = j.Now.Add(-time.Duration(r.IntN(600)) * time.Second)
	}
	switch r.IntN(6) {
	case 0:
		j.Progress = r.Float64()
	case 1:
		j.ETA = time.Duration(r.IntN(1000)) * time.Second
	case 2:
		j.QueuePosition, j.QueueRate = r.IntN(20), r.Float64()
	}
	if r.IntN(2) == 0 {
		j.Deadline = j.Now.Add(time.Duration(r.IntN(7200)-60) * time.Second)
	}
	return j
}

func TestProperties(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 7))
	for range 20000 {
		p := schedule.Policy{MinDelay: time.Duration(1+r.IntN(3)) * time.Second, Jitter: 0.3 * r.Float64(), PollCost: time.Duration(1+r.IntN(10)) * time.Second}
		j := randomJob(r)
		d := p.Next(j, r)
		left := j.Deadline.Sub(j.Now)
		if !j.Deadline.IsZero() {
			require.LessOrEqual(t, d, max(left, 0), "never past the deadline: %+v", j)
		}
		if j.Deadline.IsZero() || left >= max(p.MinDelay, j.PollAfter) {
			require.GreaterOrEqual(t, d, p.MinDelay, "never below MinDelay: %+v", j)
			require.GreaterOrEqual(t, d, j.PollAfter, "the provider's hint is a floor: %+v", j)
		}
		if !j.WebhookExpected {
			require.LessOrEqual(t, d, max(time.Duration(float64(time.Minute)*(1+p.Jitter)), j.PollAfter), "MaxDelay, jittered: %+v", j)
		}
	}
}

func TestMonotoneInPollCost(t *testing.T) {
	t.Parallel()
	// Over many jobs, dearer polls mean fewer of them and longer delays.
	r := rand.New(rand.NewPCG(8, 8))
	var durations []time.Duration
	for range 4000 {
		durations = append(durations, lognormal(r, 90, 0.5))
	}
	prevPolls, prevDelay := math.Inf(1), 0.0
	for _, c := range []time.Duration{time.Second / 2, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second} {
		p := schedule.Policy{PollCost: c}
		jr := rnd()
		polls, delay := 0, 0.0
		for _, T := range durations {
			var at time.Duration
			for n := 0; ; n++ {
				at += p.Next(schedule.Job{Now: t0.Add(at), Submitted: t0, Polls: n, Learned: total}, jr)
				polls++
				if at >= T {
					delay += (at - T).Seconds()
					break
				}
			}
		}
		meanPolls, meanDelay := float64(polls)/float64(len(durations)), delay/float64(len(durations))
		require.Less(t, meanPolls, prevPolls, "poll cost %v", c)
		require.Greater(t, meanDelay, prevDelay, "poll cost %v", c)
		prevPolls, prevDelay = meanPolls, meanDelay
	}
}
