package schedule

import (
	"cmp"
	"math"
	"math/rand/v2"
	"time"
)

// Phase is what the provider last said about a job.
type Phase uint8

// Phases.
const (
	PhaseUnknown Phase = iota // not polled yet, or an unmapped status
	PhaseQueued               // accepted, waiting to start
	PhaseRunning              // started
)

// Job is the policy's view of one job at the moment of a decision. Every
// field but Now and Submitted may be left zero for "unknown". A terminal
// job needs no decision: the caller stops polling it.
type Job struct {
	// Now is the decision time.
	Now time.Time
	// Submitted is when the provider accepted the job.
	Submitted time.Time
	// Phase is the job's last known phase.
	Phase Phase
	// Polls counts the status calls made so far (0: the first is next).
	Polls int
	// Unchanged counts the polls since the job last changed.
	Unchanged int
	// Expected is the job's expected duration (the submission's hint); 0
	// when unknown. It picks the cold-start row and the webhook quiet
	// period when no learned distribution is ready.
	Expected time.Duration
	// PollAfter is the provider's hint for the next poll (real time).
	PollAfter time.Duration
	// Deadline is when the job expires; zero for none.
	Deadline time.Time
	// WebhookExpected is true when the provider will notify completion.
	WebhookExpected bool
	// WebhookMiss is the chance this job's webhook never comes, as learned
	// from the route's earlier jobs (the share whose end a poll found
	// first); 0 is unknown. With a learned distribution, it turns the
	// fixed quiet period into a WebhookPlan.
	WebhookMiss float64
	// WebhookLate is how long after a job ends its webhook comes, as
	// learned; 0 is at once.
	WebhookLate time.Duration
	// Errors counts consecutive failed status calls.
	Errors int

	// Learned is the learned distribution of the durations from acceptance
	// to a terminal state of the job's route, model and configuration key;
	// nil, or a Weight below Policy.MinSamples, means the cold start.
	Learned *Dist
	// LearnedRun is the learned distribution of the durations from start
	// to a terminal state, used with StartedAt; nil when not kept. With
	// LearnedFailed, it holds the succeeded jobs' run times alone.
	LearnedRun *Dist
	// LearnedFailed is the learned distribution of the times from
	// acceptance to the end of the route's jobs that did not succeed
	// (failed, or canceled by the provider), and FailedShare the share of
	// jobs that end so; nil or 0 when not kept. With them, a job's end is
	// the mixture of a failure and a successful run, each conditioned on
	// what the provider reported (see endsDelay).
	LearnedFailed *Dist
	FailedShare   float64
	// StartedAt is when the provider started the job (its own timestamp,
	// else the first poll that saw it running); zero when unknown.
	StartedAt time.Time
	// Progress is the provider's completed fraction in (0, 1]; 0 or less
	// is unknown.
	Progress float64
	// QueuePosition is the job's place in the provider's queue, 1 being
	// next to start; 0 is unknown.
	QueuePosition int
	// QueueRate is how many places per second the queue advances, as the
	// caller measured from successive positions; 0 is unknown. A position
	// without a rate says nothing about time and is ignored.
	QueueRate float64
	// ETA is the provider's estimate of the time left at Now; 0 is
	// unknown.
	ETA time.Duration
}

// Policy holds a route's scheduling settings. The zero value is the default
// policy.
type Policy struct {
	// MaxDelay is the longest interval between polls: the notification
	// delay the route tolerates (default 60s). It caps every delay Next
	// returns, the cold start's first poll and a provider's poll-after hint
	// included; only a job expecting a webhook waits longer (its quiet
	// period, then Reconcile), as the provider will call.
	MaxDelay time.Duration
	// MinDelay is the shortest interval between polls (default 1s).
	MinDelay time.Duration
	// Jitter spreads each delay uniformly by ±Jitter (default 0.2).
	Jitter float64
	// WebhookGrace is how long past the expected completion a job
	// expecting a webhook waits before its first reconciliation poll
	// (default 30s); with a learned miss chance, the longest it waits.
	WebhookGrace time.Duration
	// Reconcile is the interval of reconciliation polls for a job
	// expecting a webhook (default MaxDelay); with a learned miss chance,
	// the longest interval.
	Reconcile time.Duration
	// ErrorBase is the first delay after a failed call, doubling with each
	// further failure up to MaxDelay (default 2s).
	ErrorBase time.Duration
	// PollCost is what one poll is worth in detection delay: the learned
	// schedule minimises polls + delay/PollCost (default 2s: one poll
	// more is worth finding a job done 2 s sooner).
	PollCost time.Duration
	// MinSamples is the effective sample count (Dist.Weight) from which a
	// learned distribution replaces the cold-start table (default 20).
	MinSamples float64
	// Scale compresses model time: every duration above is divided by it
	// (default 1).
	Scale float64
}

// hardFloor keeps a misconfigured policy from ever polling in a hot loop.
const hardFloor = 50 * time.Millisecond

// Defaults of the fields documented on Policy.
const (
	DefaultPollCost   = 2 * time.Second
	DefaultMinSamples = 20
)

// band is a range of delays.
type band struct{ lo, hi time.Duration }

// row is one line of the cold-start table.
type row struct {
	upTo         time.Duration // expected durations below this use the row
	first, later band
}

var table = []row{
	{30 * time.Second, band{2 * time.Second, 4 * time.Second}, band{5 * time.Second, 8 * time.Second}},
	{2 * time.Minute, band{4 * time.Second, 8 * time.Second}, band{10 * time.Second, 20 * time.Second}},
	{10 * time.Minute, band{10 * time.Second, 20 * time.Second}, band{30 * time.Second, 60 * time.Second}},
	{math.MaxInt64, band{30 * time.Second, 60 * time.Second}, band{60 * time.Second, 120 * time.Second}},
}

// unknownFirst is the first poll of a job of unknown duration; later polls
// back off from it.
const unknownFirst = 5 * time.Second

// Per-job estimates of the time left (ETA, progress, queue) are trusted to
// within ±estimateSpread of their value.
const estimateSpread = 0.25

// webhookQuantile is the learned quantile taken as a webhook job's expected
// completion: reconciliation polls before it would mostly find jobs still
// running.
const webhookQuantile = 0.9

// WithDefaults returns p with every zero field set to its default.
func (p Policy) WithDefaults() Policy {
	p.MaxDelay = cmp.Or(p.MaxDelay, 60*time.Second)
	p.MinDelay = cmp.Or(p.MinDelay, time.Second)
	if p.Jitter == 0 {
		p.Jitter = 0.2
	}
	p.WebhookGrace = cmp.Or(p.WebhookGrace, 30*time.Second)
	p.Reconcile = cmp.Or(p.Reconcile, p.MaxDelay)
	p.ErrorBase = cmp.Or(p.ErrorBase, 2*time.Second)
	p.PollCost = cmp.Or(p.PollCost, DefaultPollCost)
	p.MinSamples = cmp.Or(p.MinSamples, DefaultMinSamples)
	if p.Scale <= 0 {
		p.Scale = 1
	}
	return p
}

// Next returns how long to wait before polling the job again. The first
// rule that applies decides, in this order: consecutive errors back off; a
// job expecting a webhook waits for it; a job reporting its progress, with
// a start and learned run times (LearnedRun) but no ETA, follows the
// cost-optimal plan of the run times consistent with the report (see
// progressSlack); a per-job estimate of the time left (ETA, else progress,
// else queue position and rate) places the poll around it; with a learned
// distribution, a queued job is planned as if it started now and any other
// follows the cost-optimal plan from its elapsed time (since its start
// with LearnedRun and StartedAt); else the cold-start table. Then floors
// (MinDelay, the provider's PollAfter) and the deadline apply: no delay
// runs past the deadline, so the last check is at it.
func (p Policy) Next(j Job, rnd *rand.Rand) time.Duration {
	p = p.WithDefaults()
	d := p.delay(&j, rnd)
	d = max(d, p.real(p.MinDelay), j.PollAfter)
	if !j.WebhookExpected || j.Errors > 0 {
		d = p.capped(d, rnd)
	}
	d = max(d, hardFloor)
	if !j.Deadline.IsZero() {
		if left := j.Deadline.Sub(j.Now); d > left {
			d = max(left, 0)
		}
	}
	return d
}

// capped holds a delay to MaxDelay, the longest gap the route tolerates,
// whatever proposed it: the cold-start table's first poll and its bands, a
// jittered delay, an estimate of the time left, a provider's poll-after
// hint. A delay that would pass it lands uniformly in the top Jitter of
// the cap, so jobs held there are still spread, not in lockstep.
func (p Policy) capped(d time.Duration, rnd *rand.Rand) time.Duration {
	limit := p.real(p.MaxDelay)
	if d <= limit {
		return d
	}
	return limit - time.Duration(rnd.Float64()*min(p.Jitter, 1)*float64(limit))
}

// Longest is the longest interval the policy puts between two polls of a
// job (the reconciliation interval of a job expecting a webhook, else
// MaxDelay), in real time. Provider hints and route pauses may wait longer.
func (p Policy) Longest() time.Duration {
	p = p.WithDefaults()
	return p.real(max(p.MaxDelay, p.Reconcile))
}

// real converts a policy duration (model time) to real time.
func (p Policy) real(d time.Duration) time.Duration {
	return time.Duration(float64(d) / p.Scale)
}

// delay is the delay in real time, before floors and the deadline.
func (p Policy) delay(j *Job, rnd *rand.Rand) time.Duration {
	if j.Errors > 0 {
		return p.real(p.jitter(min(p.MaxDelay, doubled(p.ErrorBase, j.Errors-1)), rnd))
	}
	if j.Expected > 0 { // see prior.go
		prior := HintPrior(j.Expected)
		if p.failedReady(j) {
			prior = prior.Mixed(j.LearnedFailed, j.FailedShare)
		}
		j.Learned = shrunk(j.Learned, j.Expected, prior)
	}
	learned := p.ready(j.Learned)
	if j.WebhookExpected && learned && j.WebhookMiss > 0 {
		// Jittered later only, not held to MaxDelay (the webhook is
		// expected, and a poll before it is wasted on every job whose
		// webhook comes: centred, as a plan's poll is, it cost 8 % more
		// polls at the delay on webhook-30% in pollux simulate), but held
		// to the plan's longest gap, the table's quiet period first.
		pl := p.webhookPlan(j.Learned, j.WebhookMiss, j.WebhookLate)
		elapsed := j.Now.Sub(j.Submitted)
		d := pl.Delay(elapsed)
		return min(time.Duration(float64(d)*(1+p.Jitter*rnd.Float64())), max(d, pl.longest(elapsed)))
	}
	if j.WebhookExpected {
		expected := j.Expected
		if learned {
			expected = j.Learned.Quantile(webhookQuantile)
		}
		quiet := cmp.Or(expected, p.real(unknownFirst)) + p.real(p.WebhookGrace)
		if elapsed := j.Now.Sub(j.Submitted); elapsed < quiet {
			return quiet - elapsed
		}
		return p.real(p.jitter(p.Reconcile, rnd))
	}
	if d, ok := p.progressDelay(j); ok {
		return p.jitter(d, rnd)
	}
	if left, ok := p.timeLeft(j); ok {
		return p.jitter(p.around(left), rnd)
	}
	run := p.ready(j.LearnedRun)
	switch {
	case j.Phase == PhaseQueued && (run || learned):
		// Nothing but a failure ends before it starts: plan as if it
		// started now.
		d := j.Learned
		if run {
			if d, ok := p.endsDelay(j, 0, true); ok {
				return p.planned(d, rnd)
			}
			d = j.LearnedRun
		}
		return p.planned(p.plan(d).Delay(0), rnd)
	case run && !j.StartedAt.IsZero():
		r := j.Now.Sub(j.StartedAt)
		if d, ok := p.endsDelay(j, r.Seconds(), false); ok {
			return p.planned(d, rnd)
		}
		return p.planned(p.plan(j.LearnedRun).Delay(r), rnd)
	case learned:
		return p.planned(p.plan(j.Learned).Delay(j.Now.Sub(j.Submitted)), rnd)
	}
	return p.real(p.coldDelay(j, rnd))
}

// ready reports whether a learned distribution has enough samples.
func (p Policy) ready(d *Dist) bool { return d != nil && d.Weight() >= p.MinSamples }

// UsesLearned reports whether Next follows d, a learned distribution, rather
// than the cold-start table: whether d has MinSamples effective samples.
// What shows the schedule's plan asks this, not a threshold of its own.
func (p Policy) UsesLearned(d *Dist) bool { return p.WithDefaults().ready(d) }

// ColdTimes returns the poll times, from submission, that Next gives a job
// while no distribution is learned (UsesLearned false): the cold-start
// table's row for expected (the submission's hint, real time; 0 for none),
// for a job whose first poll finds it started and later ones no change,
// that meets no error, provider hint or webhook, each delay at the middle
// of its jitter: at least n of them, and on to the first at or past
// horizon (at most maxColdTimes).
func (p Policy) ColdTimes(expected, horizon time.Duration, n int) []time.Duration {
	p = p.WithDefaults()
	mid := rand.New(midSource{})
	var at time.Time
	var out []time.Duration
	var t time.Duration
	for i := 0; i < maxColdTimes && (i < max(n, 1) || t < horizon); i++ {
		t += p.Next(Job{Now: at.Add(t), Submitted: at, Polls: i, Unchanged: max(i-1, 0), Expected: expected}, mid)
		out = append(out, t)
	}
	return out
}

// maxColdTimes bounds ColdTimes.
const maxColdTimes = 100_000

// midSource makes every draw of a rand.Rand's Float64 0.5: each jitter at
// the middle of its range.
type midSource struct{}

func (midSource) Uint64() uint64 { return 1 << 52 }

// timeLeft estimates the job's remaining time (real) from its own signals.
func (p Policy) timeLeft(j *Job) (time.Duration, bool) {
	switch {
	case j.ETA > 0:
		return j.ETA, true
	case j.Progress > 0:
		start := j.Submitted
		if !j.StartedAt.IsZero() {
			start = j.StartedAt
		}
		if ran := j.Now.Sub(start); ran > 0 {
			f := min(j.Progress, 1)
			return time.Duration(float64(ran) * (1 - f) / f), true
		}
	case j.QueuePosition > 0 && j.QueueRate > 0:
		left := time.Duration(float64(j.QueuePosition) / j.QueueRate * float64(time.Second))
		if p.ready(j.LearnedRun) {
			left += j.LearnedRun.Quantile(0.5)
		}
		return left, true
	}
	return 0, false
}

// around places the next poll for a job believed to end uniformly within
// left·(1 ± estimateSpread): at the window's start plus the even spacing g
// that suits a uniform distribution over its width w — polls w/2g and
// delay g/2 cost least at g = √(w·PollCost) — but not past its end; within
// [MinDelay, MaxDelay]. The estimate is refreshed at every poll.
func (p Policy) around(left time.Duration) time.Duration {
	c := p.costs()
	x := left.Seconds()
	lo, w := x*(1-estimateSpread), 2*estimateSpread*x
	gap := math.Sqrt(w * c.cost)
	return seconds(min(max(lo+min(gap, w), c.minGap), c.maxGap))
}

// coldDelay is the cold-start delay in model time.
func (p Policy) coldDelay(j *Job, rnd *rand.Rand) time.Duration {
	elapsed := time.Duration(float64(j.Now.Sub(j.Submitted)) * p.Scale)
	expected := time.Duration(float64(j.Expected) * p.Scale)
	if expected <= 0 {
		return p.jitter(min(p.MaxDelay, doubled(unknownFirst, j.Unchanged)), rnd)
	}

	r := rowFor(expected)
	if j.Polls == 0 {
		return uniform(r.first, rnd)
	}
	d := doubled(r.later.lo, j.Unchanged)
	if elapsed < 2*expected {
		d = min(d, r.later.hi)
	}
	if j.Phase == PhaseQueued {
		d = max(d, r.later.hi) // queued: nothing will finish soon
	}
	return p.jitter(min(d, p.MaxDelay), rnd)
}

func rowFor(expected time.Duration) row {
	for _, r := range table {
		if expected < r.upTo {
			return r
		}
	}
	return table[len(table)-1]
}

// doubled returns base·2^n without overflowing.
func doubled(base time.Duration, n int) time.Duration {
	if n > 30 {
		n = 30
	}
	d := base << n
	if d < base {
		return math.MaxInt64
	}
	return d
}

func (p Policy) jitter(d time.Duration, rnd *rand.Rand) time.Duration {
	return Jitter(d, p.Jitter, rnd)
}

// planned jitters a planned delay within d·(1 ± Jitter/2), but not past
// MaxDelay: centred on the plan's poll, so the mean gap is the plan's. A
// jitter only later lengthened every planned gap by Jitter/2 on average
// and stretched the tail of the detection delays past the cold-start
// table's (mixed/fast in pollux simulate: p95 10.3 s against 8.0 s; 7.8 s
// centred), where a poll moved either way off the optimum costs only to
// second order. The band is as wide as before (Jitter·d), so a fleet's
// polls spread as much.
func (p Policy) planned(d time.Duration, rnd *rand.Rand) time.Duration {
	return min(time.Duration(float64(d)*(1+p.Jitter*(rnd.Float64()-0.5))), max(d, p.real(p.MaxDelay)))
}

func uniform(b band, rnd *rand.Rand) time.Duration {
	return b.lo + time.Duration(rnd.Float64()*float64(b.hi-b.lo))
}
