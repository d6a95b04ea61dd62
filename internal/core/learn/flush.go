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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/schedule"
)

// Writing what a process learned: its batches folded into the shared
// records with compare-and-set.

// Flush writes the queued durations, queue and webhook observations; what
// cannot be written stays queued.
func (s *Stats) Flush(ctx context.Context) {
	flushPending(ctx, s, &s.qpending, s.foldQueue, mergeQueue, "the queue velocity")
	flushPending(ctx, s, &s.wpending, s.foldWebhook, mergeWebhook, "the webhook reliability")
	flushPending(ctx, s, &s.pending, s.fold, mergeDurations, "learned durations")
}

// flushPending folds each batch of *pending, taken out under s.pmu; a
// batch that fails goes back, with what came for its key meanwhile merged
// into it (merge), for the next flush.
func flushPending[B any](ctx context.Context, s *Stats, pending *map[string]*B, fold func(context.Context, string, *B) error, merge func(b, cur *B), what string) {
	s.pmu.Lock()
	work := *pending
	*pending = map[string]*B{}
	s.pmu.Unlock()
	for k, b := range work {
		if err := fold(ctx, k, b); err != nil {
			s.log.Warn().Err(err).Str(logkey.Key, k).Msg("saving " + what + " failed; will retry")
			s.pmu.Lock()
			if cur := (*pending)[k]; cur != nil {
				merge(b, cur)
			}
			(*pending)[k] = b
			s.pmu.Unlock()
		}
	}
}

// mergeDurations adds cur, a batch that came while b failed to fold, into
// b, bounded.
func mergeDurations(b, cur *batch) {
	for _, d := range cur.total {
		b.total = appendBounded(b.total, d)
	}
	for _, d := range cur.run {
		b.run = appendBounded(b.run, d)
	}
	b.lengths = append(b.lengths, cur.lengths[:min(len(cur.lengths), maxPending-len(b.lengths))]...)
	b.outcomes = append(b.outcomes, cur.outcomes[:min(len(cur.outcomes), maxPending-len(b.outcomes))]...)
	b.ends = append(b.ends, cur.ends[:min(len(cur.ends), maxPending-len(b.ends))]...)
}

// fold adds a batch to its record with compare-and-set.
func (s *Stats) fold(ctx context.Context, k string, b *batch) error {
	var r Record
	var was float64
	var learned time.Duration
	written, err := update(ctx, s.kv, k, func(old []byte) ([]byte, error) {
		r = Record{}
		if old != nil && json.Unmarshal(old, &r) != nil {
			r = Record{} // unreadable: start over rather than stay stuck
		}
		r.Route, r.Model, r.ConfigKey = b.route, b.model, b.configKey
		learned = 0
		if r.Total.Weight() >= schedule.DefaultMinSamples {
			learned = r.Total.Quantile(0.5)
		}
		was = r.Drift
		r.Recent = recent(r.Recent, b.total)
		r.Drift = drift(was, learned, r.Recent)
		for _, d := range b.total {
			r.Total.Observe(d)
		}
		for _, d := range b.run {
			r.Run.Observe(d)
		}
		for _, failed := range b.outcomes {
			r.Ended = r.Ended*outcomeDecay + 1
			r.Failed *= outcomeDecay
			if failed {
				r.Failed++
			}
		}
		if len(b.ends) > 0 && r.Ends == nil {
			r.Ends = &Ends{}
		}
		for _, e := range b.ends {
			r.Ends.Observe(e.total, e.succeeded)
		}
		if len(b.lengths) > 0 {
			if r.Length == nil {
				r.Length = &LengthFit{}
			}
			for _, o := range b.lengths {
				r.Length.Total.Observe(o.length, o.total)
				if o.run > 0 {
					r.Length.Run.Observe(o.length, o.run)
				}
			}
		}
		r.UpdatedAt = time.Now().UTC()
		return json.Marshal(r)
	})
	if err != nil {
		return err
	}
	s.install(k, r.snapshot(written))
	if (was > 0) != (r.Drift > 0) && s.OnDrift != nil {
		d := Drift{Route: r.Route, Model: r.Model, ConfigKey: r.ConfigKey, Drifting: r.Drift > 0,
			Ratio: r.Drift, Learned: learned, Recent: seconds(median(r.Recent)), RecentN: len(r.Recent), Rev: written}
		if !d.Drifting {
			d.Ratio = d.Recent.Seconds() / max(learned.Seconds(), 1e-9)
		}
		s.OnDrift(d)
	}
	return nil
}

// update writes key's value with compare-and-set, the one way this
// package writes the bucket: change gets the value as it stands (nil when
// there is none) and returns the new one; a concurrent write makes it read
// and change again, up to 10 times. It returns the revision written.
func update(ctx context.Context, kv jetstream.KeyValue, key string, change func(old []byte) ([]byte, error)) (uint64, error) {
	for range 10 {
		var old []byte
		var rev uint64
		e, err := kv.Get(ctx, key)
		switch {
		case err == nil:
			old, rev = e.Value(), e.Revision()
		case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		default:
			return 0, err
		}
		data, err := change(old)
		if err != nil {
			return 0, err
		}
		var written uint64
		if rev == 0 {
			written, err = kv.Create(ctx, key, data)
		} else {
			written, err = kv.Update(ctx, key, data, rev)
		}
		switch {
		case err == nil:
			return written, nil
		case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			continue
		default:
			return 0, err
		}
	}
	return 0, fmt.Errorf("%s: too many concurrent writers", key)
}
