package learn

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/logkey"
)

// Queue velocity: how fast a route's provider queue moves, learned from
// every poll that saw a queued job's place (see ObserveQueue), shared by
// the fleet in the stats bucket under QueueKey, and handed to the
// schedule, which turns a job's place into an estimate of its wait.

// QueueRecord is a route's queue velocity in the stats bucket: places
// moved and seconds observed, both decaying with queueHalfLife, so the
// rate follows a provider whose queue speeds up or slows down.
type QueueRecord struct {
	Route     string    `json:"route"`
	Scope     string    `json:"scope"` // ScopeQueue
	Moved     float64   `json:"moved"`
	Seconds   float64   `json:"seconds"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ScopeQueue is the Scope of a route's queue velocity record.
const ScopeQueue = "queue"

// QueueKey is the bucket key of a route's queue velocity.
func QueueKey(route string) string { return route + "." + ScopeQueue }

const (
	// queueHalfLife is the age at which an observation weighs half.
	queueHalfLife = 10 * time.Minute
	// minQueueSeconds is how much observation a rate needs before it is
	// given to the schedule.
	minQueueSeconds = 30
)

// Rate is the record's places a second at now; 0 while it has seen too
// little.
func (q QueueRecord) Rate() float64 {
	if q.Seconds < minQueueSeconds || q.Moved <= 0 {
		return 0
	}
	return q.Moved / q.Seconds
}

// decayed is q aged to now.
func (q QueueRecord) decayed(now time.Time) QueueRecord {
	if !q.UpdatedAt.IsZero() && now.After(q.UpdatedAt) {
		f := math.Exp2(-now.Sub(q.UpdatedAt).Seconds() / queueHalfLife.Seconds())
		q.Moved, q.Seconds = q.Moved*f, q.Seconds*f
	}
	q.UpdatedAt = now
	return q
}

// queueBatch is what this process saw of a route's queue since its last
// flush.
type queueBatch struct{ moved, seconds float64 }

// ObserveQueue records that a queued job moved moved places (0 when its
// place did not change) in elapsed: what a poll saw against the job's
// place at the poll before. It never blocks on I/O.
func (s *Stats) ObserveQueue(route string, moved float64, elapsed time.Duration) {
	if !(moved >= 0) || elapsed <= 0 || elapsed > time.Hour {
		return
	}
	s.pmu.Lock()
	defer s.pmu.Unlock()
	b := s.qpending[route]
	if b == nil {
		b = &queueBatch{}
		s.qpending[route] = b
	}
	b.moved += moved
	b.seconds += elapsed.Seconds()
}

// QueueRate is how many places a second the route's provider queue moves,
// as the fleet learned it; 0 when unknown.
func (s *Stats) QueueRate(route string) float64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.queues[route].rate
}

// queueSnapshot is a route's mirrored queue velocity and its revision.
type queueSnapshot struct {
	rate float64
	rev  uint64
}

// applyQueue mirrors a queue velocity record.
func (s *Stats) applyQueue(e jetstream.KeyValueEntry) {
	route := strings.TrimSuffix(e.Key(), "."+ScopeQueue)
	var q QueueRecord
	if e.Operation() == jetstream.KeyValuePut {
		if err := json.Unmarshal(e.Value(), &q); err != nil {
			s.log.Warn().Err(err).Str(logkey.Key, e.Key()).Msg("ignoring an unreadable queue velocity")
			return
		}
	}
	s.installQueue(route, queueSnapshot{rate: q.Rate(), rev: e.Revision()})
}

func (s *Stats) installQueue(route string, q queueSnapshot) { installNewer(s, s.queues, route, q) }

// mergeQueue adds cur, a batch that came while b failed to fold, into b.
func mergeQueue(b, cur *queueBatch) {
	b.moved, b.seconds = b.moved+cur.moved, b.seconds+cur.seconds
}

// foldQueue adds a batch to the route's record with compare-and-set.
func (s *Stats) foldQueue(ctx context.Context, route string, b *queueBatch) error {
	var q QueueRecord
	written, err := update(ctx, s.kv, QueueKey(route), func(old []byte) ([]byte, error) {
		q = QueueRecord{}
		if old != nil && json.Unmarshal(old, &q) != nil {
			q = QueueRecord{}
		}
		q = q.decayed(time.Now().UTC())
		q.Route, q.Scope = route, ScopeQueue
		q.Moved += b.moved
		q.Seconds += b.seconds
		return json.Marshal(q)
	})
	if err != nil {
		return err
	}
	s.installQueue(route, queueSnapshot{rate: q.Rate(), rev: written})
	return nil
}
