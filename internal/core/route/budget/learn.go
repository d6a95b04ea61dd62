package budget

// Learned call rates.
//
// A budget whose limit learns (Limit.Learn) takes its rate from the
// provider's answers. A call the provider refuses with a rate limit that
// names no Retry-After (a Retry-After is obeyed first, as a route pause)
// lowers the rate to Decrease of what it was — the learned rate, else the
// configured one, else the calls a second this process made over the last
// rateWindow — and that rate becomes the ceiling. While calls wait for a
// lease and none is refused, every IncreaseEvery the rate rises: by
// IncreaseStep of the ceiling up to the ceiling, and by Probe times beyond
// it (the ceiling was met without a refusal, so it was too low: a kind of
// call refused while it made few calls, say), never above a configured
// rate. Below the ceiling that is additive-increase/multiplicative-
// decrease, the way TCP shares a link: the rate saws between Decrease and 1
// of the provider's, about 85% on average, and each climb back (six steps,
// half a minute) costs a refusal or two.
//
// The rate is shared by the whole fleet in the limits bucket
// (events.Namespace.LimitsBucket), one key per level and kind
// (events.LimitsKey), changed by compare-and-set: refusals seen at once by
// many processes lower it once, and after a decrease, refusals of calls
// made under the old rate count for nothing for HoldAfterDecrease. Every
// process watches its keys and applies a change at once: the budget's
// leases become ceil(rate) (or the configured concurrency) and each rests
// leases/rate after use, the shape a configured rate has. A learning
// budget with nothing configured and nothing learned yet costs nothing:
// its calls take no lease until the first refusal.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
)

// Learning constants.
const (
	// Decrease is what is left of the rate after a refusal.
	Decrease = 0.7
	// IncreaseStep is the share of the ceiling (the rate last refused)
	// the rate rises by every IncreaseEvery while calls wait for it and
	// none is refused.
	IncreaseStep = 0.05
	// Probe multiplies a rate that has reached its ceiling every
	// IncreaseEvery while calls wait for it and none is refused.
	Probe = 1.25
	// IncreaseEvery is how long the rate must hold before it rises.
	IncreaseEvery = 5 * time.Second
	// HoldAfterDecrease is how long after a decrease a refusal does not
	// lower the rate again: the calls in flight were made under the old
	// one.
	HoldAfterDecrease = time.Second
	// MinRate and MaxRate bound a learned rate (calls a second).
	MinRate = 0.1
	MaxRate = 10_000.0
	// maxLearnLeases is the most leases a learning budget with no
	// configured concurrency has out (its consumer's MaxAckPending).
	maxLearnLeases = 10_000
	// rateWindow is how far back a process counts its calls to estimate
	// the rate the first refusal lowers.
	rateWindow = 2 * time.Second
	// waited is how long an Acquire must wait for the budget to count as
	// binding (a rate may rise only while it holds calls back).
	waited = 25 * time.Millisecond
)

// LearnedRate is a level's learned rate of one kind of call, as the limits
// bucket keeps it.
type LearnedRate struct {
	// Rate is the calls a second in force; 0: none learned.
	Rate float64 `json:"rate"`
	// At is when it last changed.
	At time.Time `json:"at"`
	// Ceiling is the rate in force when the provider last refused a call.
	Ceiling float64 `json:"ceiling"`
	// Lowered counts the decreases since the rate was first learned.
	Lowered int `json:"lowered"`
	// Configured is the configured rate (0: none), for operators to
	// compare.
	Configured float64 `json:"configured,omitempty"`
}

// learned is a learned rate with its revision in the bucket (0: none).
type learned struct {
	LearnedRate
	rev uint64
}

// learner is a budget's learning of its rate.
type learner struct {
	b     *Budget
	js    jetstream.JetStream
	ns    events.Namespace
	slots jetstream.Stream
	kv    jetstream.KeyValue
	log   zerolog.Logger
	key   string
	limit Limit // as configured
	cur   atomic.Pointer[learned]
	calls callCounter
	// waitedAt and triedAt are unix nanoseconds: the last Acquire that
	// waited, and the last attempt to raise the rate.
	waitedAt, triedAt atomic.Int64

	mu     sync.Mutex // serialises apply
	leases int        // lease messages as last set; -1: not set
	stop   context.CancelFunc
	done   chan struct{}
}

// learn makes b learn its rate from the limits bucket's key: it loads the
// rate in force and watches for changes until b.Close.
func (b *Budget) learn(ctx context.Context, js jetstream.JetStream, ns events.Namespace, slots jetstream.Stream, key string, l Limit, log zerolog.Logger) error {
	kv, err := js.KeyValue(ctx, ns.LimitsBucket())
	if err != nil {
		return fmt.Errorf("learned rates: %w", err)
	}
	lr := &learner{b: b, js: js, ns: ns, slots: slots, kv: kv, key: key, limit: l, log: log, leases: -1, done: make(chan struct{})}
	lr.cur.Store(&learned{})
	e, err := kv.Get(ctx, key)
	switch {
	case err == nil:
		lr.set(e)
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("learned rate %s: %w", key, err)
	}
	if err := lr.apply(ctx); err != nil {
		return err
	}
	w, err := kv.Watch(context.WithoutCancel(ctx), key, jetstream.UpdatesOnly())
	if err != nil {
		return fmt.Errorf("watch learned rate %s: %w", key, err)
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	lr.stop = stop
	b.learner = lr
	go func() {
		defer close(lr.done)
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-wctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					continue
				}
				lr.set(e)
				// Failing, the leases keep their number until the next
				// change or process start; the rest is in force.
				actx, cancel := context.WithTimeout(wctx, 10*time.Second)
				_ = lr.apply(actx)
				cancel()
			}
		}
	}()
	return nil
}

// set takes a bucket entry as the rate in force (a deleted key: none
// learned), unless it is older than the one held.
func (lr *learner) set(e jetstream.KeyValueEntry) {
	next := &learned{rev: e.Revision()}
	if e.Operation() == jetstream.KeyValuePut && json.Unmarshal(e.Value(), &next.LearnedRate) != nil {
		next.LearnedRate = LearnedRate{} // unreadable: as if none
	}
	for {
		cur := lr.cur.Load()
		if cur.rev > next.rev || lr.cur.CompareAndSwap(cur, next) {
			return
		}
	}
}

// shape is the budget a rate in force makes: its leases and their rest,
// or open when nothing limits it.
func (lr *learner) shape(rate float64) (n int, cooldown time.Duration, open bool) {
	l := lr.limit
	if rate > 0 && (l.Rate <= 0 || rate < l.Rate) {
		l.Rate = rate
	}
	if l.Concurrency <= 0 && l.Rate <= 0 {
		return 0, 0, true
	}
	n, cooldown = l.leases()
	return n, cooldown, false
}

// apply makes the budget the rate in force: the rest of its leases, and
// their number (on the server, idempotent: every process applies every
// change).
func (lr *learner) apply(ctx context.Context) error {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	n, cooldown, open := lr.shape(lr.cur.Load().Rate)
	lr.b.cooldown.Store(int64(cooldown))
	lr.b.open.Store(open)
	if open || n == lr.leases {
		return nil
	}
	if err := setLeases(ctx, lr.js, lr.ns, lr.slots, lr.b.scope, lr.b.kind, n); err != nil {
		return fmt.Errorf("%s budget of %s: %d leases for a learned rate: %w", lr.b.kind, lr.b.level, n, err)
	}
	lr.leases = n
	return nil
}

// refused lowers the rate after a refusal (see the file's comment).
func (lr *learner) refused() {
	now := time.Now()
	cur := lr.cur.Load()
	if cur.Rate > 0 && now.Sub(cur.At) < HoldAfterDecrease {
		return
	}
	base := cur.Rate
	if base <= 0 {
		base = lr.limit.Rate
	}
	if base <= 0 {
		base = lr.calls.rate(now)
	}
	next := cur.LearnedRate
	next.Rate, next.Ceiling, next.Configured = max(MinRate, base*Decrease), base, lr.limit.Rate
	next.At = now.UTC()
	next.Lowered++
	lr.write(cur, next, false)
}

// succeeded counts a call the provider took and raises the rate when it
// held long enough while calls waited for it.
func (lr *learner) succeeded() {
	now := time.Now()
	cur := lr.cur.Load()
	if cur.Rate <= 0 || now.Sub(cur.At) < IncreaseEvery ||
		now.UnixNano()-lr.waitedAt.Load() > int64(IncreaseEvery) ||
		now.UnixNano()-lr.triedAt.Load() < int64(time.Second) {
		return
	}
	lr.triedAt.Store(now.UnixNano())
	next := cur.LearnedRate
	if cur.Rate < cur.Ceiling {
		next.Rate = min(cur.Ceiling, cur.Rate+IncreaseStep*cur.Ceiling)
	} else {
		next.Rate = cur.Rate * Probe
	}
	next.Rate = min(MaxRate, next.Rate)
	next.At = now.UTC()
	lr.write(cur, next, lr.limit.Rate > 0 && next.Rate >= lr.limit.Rate)
}

// write replaces the rate seen (cur) by next, or deletes it (configured:
// the configured rate is in force again), unless another process changed
// it first: then that change stands.
func (lr *learner) write(cur *learned, next LearnedRate, configured bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var err error
	var rev uint64
	switch {
	case configured:
		err = lr.kv.Delete(ctx, lr.key, jetstream.LastRevision(cur.rev))
	case cur.rev == 0:
		rev, err = lr.kv.Create(ctx, lr.key, mustJSON(next))
	default:
		rev, err = lr.kv.Update(ctx, lr.key, mustJSON(next), cur.rev)
	}
	if err != nil {
		return // changed meanwhile (the watcher brings it), or unreachable (the next call tries again)
	}
	ev := lr.log.Info()
	if next.Rate < cur.Rate || cur.Rate == 0 {
		ev = lr.log.Warn()
	}
	ev.Str(logkey.Level, lr.b.level).Str(logkey.Kind, lr.b.kind).Float64(logkey.Was, cur.Rate).Float64(logkey.Rate, next.Rate).Bool(logkey.Configured, configured).
		Msg("learned call rate changed (calls a second fleet-wide; was 0: none learned)")
	if configured {
		return
	}
	// In force here at once; the watcher brings it to the others.
	lr.cur.CompareAndSwap(cur, &learned{LearnedRate: next, rev: rev}) // or the watcher was first
	_ = lr.apply(ctx)                                                 // failing, the watcher's apply tries again
}

func (lr *learner) close() {
	lr.stop()
	<-lr.done
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // a LearnedRate always encodes
	}
	return b
}

// callCounter counts calls in quarter-second buckets over rateWindow.
type callCounter struct {
	mu      sync.Mutex
	buckets [int(rateWindow / bucketWidth)]int
	at      int64     // the newest bucket's index (unix time / bucketWidth)
	first   time.Time // the first call counted
}

const bucketWidth = 250 * time.Millisecond

func (c *callCounter) add(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(now)
	c.buckets[c.at%int64(len(c.buckets))]++
	if c.first.IsZero() {
		c.first = now
	}
}

// rate is the calls a second counted over the window, or since the first
// call when that is shorter (at least a second): the burst a process
// starts with is not spread over a window it did not call in.
func (c *callCounter) rate(now time.Time) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(now)
	n := 0
	for _, v := range c.buckets {
		n += v
	}
	over := min(rateWindow, max(time.Second, now.Sub(c.first)))
	return float64(n) / over.Seconds()
}

func (c *callCounter) advance(now time.Time) {
	i := now.UnixNano() / int64(bucketWidth)
	for j := c.at + 1; j <= i && j <= c.at+int64(len(c.buckets)); j++ {
		c.buckets[j%int64(len(c.buckets))] = 0
	}
	c.at = max(c.at, i)
}

// Learned is the rate this budget learned and applies now (zero when it
// learns nothing, or learned nothing yet), and whether its calls take no
// lease (nothing limits them yet).
func (b *Budget) Learned() (rate LearnedRate, open bool) {
	if b == nil || b.learner == nil {
		return LearnedRate{}, false
	}
	return b.learner.cur.Load().LearnedRate, b.open.Load()
}
