package learn

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Webhook reliability: how often a route's webhooks never come, and how
// late the others do, learned from every job that expected one and ended
// on its own, shared by the fleet in the stats bucket under WebhookKey,
// and handed to the schedule, which plans a webhook job's reconciliation
// polls by them (schedule.Policy.WebhookPlan).
//
// A job expecting a webhook whose end a poll found first counts as a
// miss, unless the poll came so soon after the provider's completion time
// (within twice the learned lateness, at least unsureWithin) that the
// webhook may still have been on its way: that job teaches nothing.
// Without the exception, polls that beat webhooks would raise the miss
// chance, which makes polls more frequent, which beat more webhooks. A
// delivered webhook teaches its lateness: the time from the provider's
// completion time to the delivery (0 when the provider gives none).

// WebhookRecord is a route's webhook reliability in the stats bucket:
// deliveries and misses, both decaying by webhookHalfLife jobs, and the
// lateness of the deliveries.
type WebhookRecord struct {
	Route     string        `json:"route"`
	Scope     string        `json:"scope"` // ScopeWebhook
	Delivered float64       `json:"delivered"`
	Missed    float64       `json:"missed"`
	Late      schedule.Dist `json:"late"`
	UpdatedAt time.Time     `json:"updated_at"`
}

// ScopeWebhook is the Scope of a route's webhook reliability record.
const ScopeWebhook = "webhook"

// WebhookKey is the bucket key of a route's webhook reliability.
func WebhookKey(route string) string { return route + "." + ScopeWebhook }

const (
	// webhookHalfLife is the number of jobs after which one weighs half:
	// long enough to tell a 1% miss rate from 2%, short enough to follow
	// a provider whose deliveries start failing within a few hundred
	// jobs.
	webhookHalfLife = 500
	// minWebhookJobs is how many (decayed) jobs a route's record needs
	// before the schedule is given its miss chance.
	minWebhookJobs = 50
	// lateQuantile of the deliveries' lateness is what the schedule
	// plans for.
	lateQuantile = 0.9
	// unsureWithin is the least time after the provider's completion
	// within which a poll that found the job ended does not count as a
	// miss (see above).
	unsureWithin = 5 * time.Second
)

// Miss is the chance a webhook of the route never comes, with a prior of
// one miss and one delivery (so it is never 0); 0 while the record has
// seen fewer than minWebhookJobs jobs.
func (w WebhookRecord) Miss() float64 {
	if w.Delivered+w.Missed < minWebhookJobs {
		return 0
	}
	return (w.Missed + 1) / (w.Delivered + w.Missed + 2)
}

// Lateness is how late the route's webhooks come (their 90th percentile);
// 0 before any came.
func (w WebhookRecord) Lateness() time.Duration {
	if w.Late.Weight() <= 0 {
		return 0
	}
	return w.Late.Quantile(lateQuantile)
}

// webhookBatch is what this process saw of a route's webhooks since its
// last flush.
type webhookBatch struct {
	delivered, missed float64
	late              []time.Duration
}

// webhookSnapshot is a route's mirrored webhook reliability and its
// revision.
type webhookSnapshot struct {
	miss float64
	late time.Duration
	rev  uint64
}

// observeWebhook queues what a job that ended on its own teaches of its
// route's webhooks, when it expected one.
func (s *Stats) observeWebhook(j *state.Job) {
	if !j.WebhookExpected || j.DetectedAt.IsZero() {
		return
	}
	if j.DetectedBy != state.FromWebhook {
		_, late := s.Webhook(j.Route)
		if j.DetectedAt.Sub(j.CompletedAt) < max(2*late, unsureWithin) && j.DetectedAt.After(j.CompletedAt) {
			return // the webhook may have been on its way
		}
	}
	s.pmu.Lock()
	defer s.pmu.Unlock()
	b := s.wpending[j.Route]
	if b == nil {
		b = &webhookBatch{}
		s.wpending[j.Route] = b
	}
	if j.DetectedBy != state.FromWebhook {
		b.missed++
		return
	}
	b.delivered++
	if late := j.DetectedAt.Sub(j.CompletedAt); late > 0 && late < time.Hour {
		b.late = appendBounded(b.late, late)
	} else {
		b.late = appendBounded(b.late, 0)
	}
}

// Webhook is the chance a webhook of the route never comes and how late
// the others come, as the fleet learned them; a miss of 0 is unknown.
func (s *Stats) Webhook(route string) (miss float64, late time.Duration) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	w := s.webhooks[route]
	return w.miss, w.late
}

// applyWebhook mirrors a webhook reliability record.
func (s *Stats) applyWebhook(e jetstream.KeyValueEntry) {
	route := strings.TrimSuffix(e.Key(), "."+ScopeWebhook)
	var w WebhookRecord
	if e.Operation() == jetstream.KeyValuePut {
		if err := json.Unmarshal(e.Value(), &w); err != nil {
			s.log.Warn().Err(err).Str(logkey.Key, e.Key()).Msg("ignoring an unreadable webhook reliability")
			return
		}
	}
	s.installWebhook(route, webhookSnapshot{miss: w.Miss(), late: w.Lateness(), rev: e.Revision()})
}

func (s *Stats) installWebhook(route string, w webhookSnapshot) {
	installNewer(s, s.webhooks, route, w)
}

// mergeWebhook adds cur, a batch that came while b failed to fold, into b.
func mergeWebhook(b, cur *webhookBatch) {
	b.delivered, b.missed = b.delivered+cur.delivered, b.missed+cur.missed
	for _, d := range cur.late {
		b.late = appendBounded(b.late, d)
	}
}

// foldWebhook adds a batch to the route's record with compare-and-set.
func (s *Stats) foldWebhook(ctx context.Context, route string, b *webhookBatch) error {
	var w WebhookRecord
	written, err := update(ctx, s.kv, WebhookKey(route), func(old []byte) ([]byte, error) {
		w = WebhookRecord{}
		if old != nil && json.Unmarshal(old, &w) != nil {
			w = WebhookRecord{}
		}
		w.Route, w.Scope = route, ScopeWebhook
		f := math.Exp2(-(b.delivered + b.missed) / webhookHalfLife)
		w.Delivered = w.Delivered*f + b.delivered
		w.Missed = w.Missed*f + b.missed
		for _, d := range b.late {
			w.Late.Observe(d)
		}
		w.UpdatedAt = time.Now().UTC()
		return json.Marshal(w)
	})
	if err != nil {
		return err
	}
	s.installWebhook(route, webhookSnapshot{miss: w.Miss(), late: w.Lateness(), rev: written})
	return nil
}
