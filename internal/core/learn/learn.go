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
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Record is one key's value in the stats bucket.
type Record struct {
	Route     string        `json:"route"`
	Model     string        `json:"model"`
	ConfigKey string        `json:"config_key,omitempty"`
	Total     schedule.Dist `json:"total"`
	Run       schedule.Dist `json:"run"`
	UpdatedAt time.Time     `json:"updated_at"`
	// Recent are the last RecentJobs total durations in seconds, oldest
	// first.
	Recent []float64 `json:"recent_s,omitempty"`
	// Drift is the recent median over the learned one while the model
	// drifts; 0 when it does not.
	Drift float64 `json:"drift,omitempty"`
	// Length regresses the model's durations on the length its jobs ask
	// for, on a route with length_from (model level only; see Lookup).
	Length *LengthFit `json:"length,omitempty"`
	// Ended and Failed count the model's jobs that ended succeeded, failed,
	// lost or expired, and those not succeeded, decaying like the
	// distributions (model level only; see Failures).
	Ended  float64 `json:"ended,omitempty"`
	Failed float64 `json:"failed,omitempty"`
	// Ends is how the model's jobs end, succeeded or not and when (model
	// level only; see ends.go); absent from records written before it.
	// Run, alongside it, learns from the jobs that succeeded.
	Ends *Ends `json:"ends,omitempty"`
}

// LengthFit is a model's durations regressed on its jobs' requested
// lengths: from acceptance and from start.
type LengthFit struct {
	Total schedule.Fit `json:"total"`
	Run   schedule.Fit `json:"run"`
}

// Key is the bucket key of a route, model and configuration key: the route
// and a hash of the rest (model names hold characters keys cannot).
func Key(route, model, configKey string) string {
	h := sha256.Sum256([]byte(model + "\x00" + configKey))
	return route + "." + enc.EncodeToString(h[:10])
}

var enc = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// levels are the keys a job teaches and falls back along, narrowest
// first: its configuration (when it has one), its model.
func levels(route, model, configKey string) []string {
	if configKey == "" {
		return []string{Key(route, model, "")}
	}
	return []string{Key(route, model, configKey), Key(route, model, "")}
}

// snapshot is an immutable pair of distributions, the record's drift, and
// the bucket revision they were read at.
type snapshot struct {
	total, run *schedule.Dist
	length     *LengthFit
	drift      float64
	// failures is the model's failure rate, with the weight it rests on.
	failures, ended float64
	// ends is how the model's jobs end; nil when not learned.
	ends *Ends
	rev  uint64
}

type batch struct {
	route, model, configKey string
	total, run              []time.Duration
	// lengths are the jobs of a known requested length (model level).
	lengths []lengthObs
	// outcomes are the jobs that ended, true for a failed or lost one
	// (model level).
	outcomes []bool
	// ends are the jobs that ended on their own (model level).
	ends []endObs
}

// endObs is one job that ended on its own: when, and whether it succeeded.
type endObs struct {
	total     time.Duration
	succeeded bool
}

// snapshot is the record's snapshot at revision rev.
func (r *Record) snapshot(rev uint64) snapshot {
	sn := snapshot{total: &r.Total, run: &r.Run, length: r.Length, drift: r.Drift, ended: r.Ended, ends: r.Ends, rev: rev}
	if r.Ended > 0 {
		sn.failures = r.Failed / r.Ended
	}
	if t := r.Ends.Total(); t != nil {
		sn.total = t // the stable mixture (see Ends.Total)
	}
	return sn
}

// outcomeDecay is the weight an outcome keeps per newer one: it weighs half
// after schedule.HalfLife of them, like a duration.
var outcomeDecay = math.Exp2(-1.0 / schedule.HalfLife)

// lengthObs is one job's requested length and durations.
type lengthObs struct {
	length     float64
	total, run time.Duration
}

// maxPending bounds the durations queued per key while the bucket is
// unreachable; older ones are dropped first.
const maxPending = 1000

// Stats mirrors the bucket and folds new durations into it.
type Stats struct {
	kv  jetstream.KeyValue
	log zerolog.Logger
	// FlushEvery is how often queued durations are written (default 1s).
	FlushEvery time.Duration
	// OnDrift, when set before Run, is told each change of a model's drift
	// this process recorded (see the package doc). It is called from the
	// flushing goroutine: it must not block for long.
	OnDrift func(Drift)

	mu   sync.RWMutex
	dist map[string]snapshot
	// blends caches Lookup's answers by their levels' revisions, so a
	// blend is made once per change, and its plan is cached.
	blends map[blendKey]blend

	// queues mirrors the routes' queue velocities (queue.go).
	queues map[string]queueSnapshot
	// webhooks mirrors the routes' webhook reliability (webhook.go).
	webhooks map[string]webhookSnapshot

	pmu      sync.Mutex
	pending  map[string]*batch
	qpending map[string]*queueBatch
	wpending map[string]*webhookBatch
}

// blend is a cached Lookup answer and the revisions it was made of.
type blend struct {
	revs       [2]uint64
	total, run *schedule.Dist
}

// New returns a Stats over the bucket; Run keeps it current.
func New(kv jetstream.KeyValue, log zerolog.Logger) *Stats {
	return &Stats{kv: kv, log: log, dist: map[string]snapshot{}, blends: map[blendKey]blend{}, queues: map[string]queueSnapshot{},
		webhooks: map[string]webhookSnapshot{},
		pending:  map[string]*batch{}, qpending: map[string]*queueBatch{}, wpending: map[string]*webhookBatch{}}
}

// Lookup returns the learned distributions of a route, model and
// configuration key, each completed by the broader levels while it has
// fewer than schedule.DefaultMinSamples effective samples (see the package
// doc); nil when nothing is learned at any level. With a requested length
// (> 0; the route's length_from) and a model whose durations were
// regressed on it, the model's level is its regression's distribution
// for that length (schedule.Fit.For). They must not be modified.
func (s *Stats) Lookup(route, model, configKey string, length float64) (total, run *schedule.Dist) {
	keys := levels(route, model, configKey)
	var sns [2]snapshot
	var revs [2]uint64
	s.mu.RLock()
	for i, k := range keys {
		sns[i] = s.dist[k]
		revs[i] = sns[i].rev
	}
	s.mu.RUnlock()
	model_ := &sns[len(keys)-1]
	bk := blendKey{key: keys[0]}
	if fit := model_.length; length > 0 && fit != nil {
		if fit.Total.Ready(schedule.DefaultMinSamples) {
			model_.total = fit.Total.For(length)
			bk.total = model_.total.ID()
		}
		if fit.Run.Ready(schedule.DefaultMinSamples) {
			model_.run = fit.Run.For(length)
			bk.run = model_.run.ID()
		}
	}
	s.mu.RLock()
	b, ok := s.blends[bk]
	s.mu.RUnlock()
	if ok && b.revs == revs {
		return b.total, b.run
	}
	b = blend{revs: revs}
	for i := len(keys) - 1; i >= 0; i-- {
		b.total = withPrior(sns[i].total, b.total)
		b.run = withPrior(sns[i].run, b.run)
	}
	s.mu.Lock()
	if len(s.blends) >= maxBlends {
		clear(s.blends) // the lengths asked for have changed: start over
	}
	s.blends[bk] = b
	s.mu.Unlock()
	return b.total, b.run
}

// blendKey identifies a cached Lookup answer: its narrowest level, and the
// identities of the length regression's distributions it used, if any.
type blendKey struct {
	key        string
	total, run uint64
}

// maxBlends bounds the Lookup cache.
const maxBlends = 1 << 14

// withPrior completes d by prior; either may be nil.
func withPrior(d, prior *schedule.Dist) *schedule.Dist {
	switch {
	case d == nil || d.Weight() <= 0:
		return prior
	case prior == nil:
		return d
	}
	return d.WithPrior(prior, schedule.DefaultMinSamples)
}

// Durations returns what a finished job teaches: its time from acceptance
// to end, and from start to end when it started. Only jobs that ended on
// their own teach anything: not expired, lost or user-canceled ones.
func Durations(j *state.Job) (total, run time.Duration, ok bool) {
	switch {
	case j.State == state.Succeeded, j.State == state.Failed:
	case j.State == state.Canceled && j.CancelRequestedAt.IsZero():
	default:
		return 0, 0, false
	}
	if j.SubmittedAt.IsZero() || j.CompletedAt.IsZero() || !j.CompletedAt.After(j.SubmittedAt) {
		return 0, 0, false
	}
	total = j.CompletedAt.Sub(j.SubmittedAt)
	if !j.StartedAt.IsZero() && j.CompletedAt.After(j.StartedAt) {
		run = j.CompletedAt.Sub(j.StartedAt)
	}
	return total, run, true
}

// Observe queues what a finished job teaches — its outcome, its
// durations, and of its route's webhooks when it expected one; it never
// blocks on I/O.
func (s *Stats) Observe(j *state.Job) {
	if j.DetectedBy == state.FromHedge {
		return // ended by its hedge: its route did not end it
	}
	s.observeOutcome(j)
	total, run, ok := Durations(j)
	if !ok {
		return
	}
	s.observeWebhook(j)
	if !succeeded(j) {
		run = 0 // a failure's time is learned from acceptance, in Ends
	}
	s.pmu.Lock()
	defer s.pmu.Unlock()
	keys := levels(j.Route, j.Model, j.ConfigKey)
	for i, k := range keys {
		b := s.pending[k]
		if b == nil {
			b = &batch{route: j.Route, model: j.Model, configKey: j.ConfigKey}
			if i > 0 {
				b.configKey = ""
			}
			s.pending[k] = b
		}
		b.total = appendBounded(b.total, total)
		if run > 0 {
			b.run = appendBounded(b.run, run)
		}
		if i == len(keys)-1 {
			if j.Length > 0 && len(b.lengths) < maxPending {
				b.lengths = append(b.lengths, lengthObs{length: j.Length, total: total, run: run})
			}
			if len(b.ends) < maxPending {
				b.ends = append(b.ends, endObs{total: total, succeeded: succeeded(j)})
			}
		}
	}
}

func appendBounded(xs []time.Duration, x time.Duration) []time.Duration {
	if len(xs) >= maxPending {
		xs = xs[1:]
	}
	return append(xs, x)
}

// Run mirrors the bucket and flushes queued durations until ctx ends,
// flushing once more on the way out. ready is closed once the bucket's
// current contents are loaded.
func (s *Stats) Run(ctx context.Context, ready chan<- struct{}) error {
	w, err := s.kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watch learned durations: %w", err)
	}
	defer func() { _ = w.Stop() }()
	t := time.NewTicker(cmp.Or(s.FlushEvery, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			s.Flush(fctx)
			cancel()
			return nil
		case <-t.C:
			s.Flush(ctx)
		case e, ok := <-w.Updates():
			if !ok && ctx.Err() != nil {
				// Stopping: the watcher closed with ctx, before Done was
				// seen.
				fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				s.Flush(fctx)
				cancel()
				return nil
			}
			if !ok {
				return errors.New("learned durations watcher closed")
			}
			if e == nil {
				if ready != nil {
					close(ready)
					ready = nil
				}
				continue
			}
			s.apply(e)
		}
	}
}

func (s *Stats) apply(e jetstream.KeyValueEntry) {
	switch {
	case strings.HasSuffix(e.Key(), "."+ScopeQueue):
		s.applyQueue(e)
		return
	case strings.HasSuffix(e.Key(), "."+ScopeWebhook):
		s.applyWebhook(e)
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		// A tombstone: nothing learned, and no older write may return.
		s.install(e.Key(), snapshot{rev: e.Revision()})
		return
	}
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		s.log.Warn().Err(err).Str(logkey.Key, e.Key()).Msg("ignoring unreadable learned durations")
		return
	}
	s.install(e.Key(), r.snapshot(e.Revision()))
}

// install keeps sn unless a later revision of the key is already in hand:
// a process's own write and the watch deliver the same revisions in no
// fixed order, and the older one must never win.
func (s *Stats) install(k string, sn snapshot) { installNewer(s, s.dist, k, sn) }

// revisioned is a mirrored record and the bucket revision it was read at.
type revisioned interface{ revision() uint64 }

func (sn snapshot) revision() uint64       { return sn.rev }
func (q queueSnapshot) revision() uint64   { return q.rev }
func (w webhookSnapshot) revision() uint64 { return w.rev }

// installNewer keeps v as m[k] unless a later revision of it is in hand
// (see install), under s.mu.
func installNewer[T revisioned](s *Stats, m map[string]T, k string, v T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := m[k]; ok && cur.revision() >= v.revision() {
		return
	}
	m[k] = v
}

// observeOutcome queues whether a job that ended succeeded (false) or
// failed, was lost or expired at its deadline (true), for the model's
// failure rate; a canceled job says nothing of the provider.
func (s *Stats) observeOutcome(j *state.Job) {
	var failed bool
	switch j.State {
	case state.Succeeded:
	case state.Failed, state.Lost, state.Expired:
		failed = true
	default:
		return
	}
	k := Key(j.Route, j.Model, "")
	s.pmu.Lock()
	defer s.pmu.Unlock()
	b := s.pending[k]
	if b == nil {
		b = &batch{route: j.Route, model: j.Model}
		s.pending[k] = b
	}
	if len(b.outcomes) < maxPending {
		b.outcomes = append(b.outcomes, failed)
	}
}

// Failures is the share of the route's model's recent jobs that failed,
// were lost or expired at their deadline, with the (decayed) number of
// jobs it rests on.
func (s *Stats) Failures(route, model string) (rate, weight float64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sn := s.dist[Key(route, model, "")]
	return sn.failures, sn.ended
}
