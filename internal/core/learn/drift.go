// Package learn keeps the fleet's learned job durations: per route, model
// and optional configuration key, two schedule.Dists (acceptance to end,
// and start to end) in the stats bucket, shared by every process. Whoever
// sees a job end queues its durations; they are folded into the bucket
// with compare-and-set once a second per key, so a busy model costs one
// write per second per process, not one per job. Every process mirrors the
// bucket through a watch and hands the poller immutable snapshots.
//
// Each job teaches two levels: its model with its configuration key (when
// it has one), and its model on the route. Lookup falls back along them: a
// configuration seen a few times is completed by its model's distribution,
// weighted by what it lacks of schedule.DefaultMinSamples effective samples
// (schedule.Dist.WithPrior). A model the route has too little of gets the
// schedule's cold-start table, chosen by the submission's own expected
// duration: a mix of the route's other models would be worse (it was tried,
// and the demo's webhook jobs, reconciled at the mix's 90th percentile
// rather than their own hint's, made 35% more polls).
//
// # Queue velocity
//
// Each route's provider queue velocity — places a second, from what every
// poll saw of a queued job's place against the poll before — is kept under
// QueueKey, decaying with a 10-minute half-life, and read with QueueRate:
// it turns a job's place into an estimate of its wait (queue.go).
//
// # Webhook reliability
//
// Each route's webhook miss chance and lateness — from every job that
// expected a webhook and ended on its own: a miss when a poll found its end
// first, else the delay from the provider's completion time to the
// delivery — are kept under WebhookKey, decaying by 500 jobs, and read with
// Webhook once 50 jobs are seen: they turn a webhook job's fixed quiet
// period into a plan weighted by the chance its webhook is missing
// (webhook.go, schedule.Policy.WebhookPlan).
//
// # Drift
//
// A model's record keeps its last RecentJobs (16) durations. When their
// median is 1.5× the learned median or more (or 1/1.5 or less) and at
// least 15 of the 16 lie on that side of the learned median — by chance,
// whatever the distribution's spread, one window in about 2,000 — the
// model drifts: the write that finds it so calls Stats.OnDrift, once (the
// compare-and-set makes that one writer in the fleet), and so does the
// write that finds the median back within 1.25×. The learned distribution
// itself follows within a few dozen jobs (it weighs recent jobs most),
// which is what ends a drift.
package learn

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Drift detection (see the package doc).
const (
	// RecentJobs is how many recent durations a model's record keeps.
	RecentJobs = 16
	// driftSide is how many of the recent durations must lie on the
	// drift's side of the learned median for a drift to begin.
	driftSide = 15
	// driftStarts and driftEnds are the ratios (and their inverses) at
	// which a drift begins and ends.
	driftStarts = 1.5
	driftEnds   = 1.25
)

// Drift is a change of a model's drift: it began (Drifting) or ended.
type Drift struct {
	Route, Model, ConfigKey string
	Drifting                bool
	// Ratio is the recent median over the learned one.
	Ratio float64
	// Learned is the learned median, Recent the median of the last
	// RecentN durations.
	Learned, Recent time.Duration
	RecentN         int
	// Rev is the bucket revision that recorded the change.
	Rev uint64
}

// Sentence says the drift as an operator reads it.
func (d Drift) Sentence() string {
	name := d.Model
	if d.ConfigKey != "" {
		name += " [" + d.ConfigKey + "]"
	}
	how := fmt.Sprintf("%.1f× slower than", d.Ratio)
	if d.Ratio < 1 {
		how = fmt.Sprintf("%.1f× faster than", 1/d.Ratio)
	}
	if !d.Drifting {
		how = fmt.Sprintf("back within %.2g× of", driftEnds)
	}
	return fmt.Sprintf("%s is %s its learned p50 (%s; the last %d jobs: %s)", name, how,
		d.Learned.Round(100*time.Millisecond), d.RecentN, d.Recent.Round(100*time.Millisecond))
}

// recent appends durations to a record's recent ones, keeping the last
// RecentJobs.
func recent(xs []float64, add []time.Duration) []float64 {
	for _, d := range add {
		xs = append(xs, d.Seconds())
	}
	if len(xs) > RecentJobs {
		xs = append([]float64(nil), xs[len(xs)-RecentJobs:]...)
	}
	return xs
}

// drift is a record's drift after its recent durations changed: the ratio
// of their median to the learned one while it drifts, else 0. It begins
// past driftStarts with driftSide of a full window on the drift's side,
// and ends within driftEnds.
func drift(was float64, learned time.Duration, recent []float64) float64 {
	if learned <= 0 || len(recent) < RecentJobs {
		return 0
	}
	p50 := learned.Seconds()
	ratio := median(recent) / p50
	far := max(ratio, 1/ratio)
	side := 0
	for _, x := range recent {
		if (ratio > 1) == (x > p50) {
			side++
		}
	}
	switch {
	case was == 0 && far >= driftStarts && side >= driftSide, was > 0 && far >= driftEnds:
		return ratio
	}
	return 0
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

func seconds(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }

// Drift returns the route's most drifted model's ratio (recent median over
// learned), 1 when none drifts.
func (s *Stats) Drift(route string) float64 {
	prefix := route + "."
	worst := 1.0
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k, sn := range s.dist {
		if sn.drift > 0 && strings.HasPrefix(k, prefix) && max(sn.drift, 1/sn.drift) > max(worst, 1/worst) {
			worst = sn.drift
		}
	}
	return worst
}
