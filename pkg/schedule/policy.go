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

// Job is the policy's view of one job at the moment of a decision.
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
	// Expected is the job's expected duration (hint or learned); 0 when
	// unknown.
	Expected time.Duration
	// PollAfter is the provider's hint for the next poll (real time).
	PollAfter time.Duration
	// Deadline is when the job expires; zero for none.
	Deadline time.Time
	// WebhookExpected is true when the provider will notify completion.
	WebhookExpected bool
	// Errors counts consecutive failed status calls.
	Errors int
}

// Policy holds a route's scheduling settings. The zero value is the default
// policy.
type Policy struct {
	// MaxDelay is the longest interval between polls: the notification
	// delay the route tolerates (default 60s).
	MaxDelay time.Duration
	// MinDelay is the shortest interval between polls (default 1s).
	MinDelay time.Duration
	// Jitter spreads each delay uniformly by ±Jitter (default 0.2).
	Jitter float64
	// WebhookGrace is how long past the expected completion a job
	// expecting a webhook waits before its first reconciliation poll
	// (default 30s).
	WebhookGrace time.Duration
	// Reconcile is the interval of reconciliation polls for a job
	// expecting a webhook (default MaxDelay).
	Reconcile time.Duration
	// ErrorBase is the first delay after a failed call, doubling with each
	// further failure up to MaxDelay (default 2s).
	ErrorBase time.Duration
	// Scale compresses model time: every duration above is divided by it
	// (default 1).
	Scale float64
}

// hardFloor keeps a misconfigured policy from ever polling in a hot loop.
const hardFloor = 50 * time.Millisecond

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
	if p.Scale <= 0 {
		p.Scale = 1
	}
	return p
}

// Next returns how long to wait before polling the job again.
func (p Policy) Next(j Job, rnd *rand.Rand) time.Duration {
	p = p.WithDefaults()
	d := p.modelDelay(j, rnd)
	d = time.Duration(float64(d) / p.Scale)
	d = max(d, time.Duration(float64(p.MinDelay)/p.Scale), j.PollAfter, hardFloor)
	if !j.Deadline.IsZero() {
		if left := j.Deadline.Sub(j.Now); d > left {
			d = max(left, 0)
		}
	}
	return d
}

// modelDelay is the delay in model time, before floors and the deadline.
func (p Policy) modelDelay(j Job, rnd *rand.Rand) time.Duration {
	if j.Errors > 0 {
		return p.jitter(min(p.MaxDelay, doubled(p.ErrorBase, j.Errors-1)), rnd)
	}
	elapsed := time.Duration(float64(j.Now.Sub(j.Submitted)) * p.Scale)
	expected := time.Duration(float64(j.Expected) * p.Scale)

	if j.WebhookExpected {
		quiet := cmp.Or(expected, unknownFirst) + p.WebhookGrace
		if elapsed < quiet {
			return quiet - elapsed
		}
		return p.jitter(p.Reconcile, rnd)
	}

	if expected <= 0 {
		if j.Polls == 0 {
			return p.jitter(unknownFirst, rnd)
		}
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
	return p.jitter(min(d, max(p.MaxDelay, r.later.lo)), rnd)
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
	f := 1 + p.Jitter*(2*rnd.Float64()-1)
	return time.Duration(float64(d) * f)
}

func uniform(b band, rnd *rand.Rand) time.Duration {
	return b.lo + time.Duration(rnd.Float64()*float64(b.hi-b.lo))
}
