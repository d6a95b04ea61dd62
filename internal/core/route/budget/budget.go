// Package budget enforces call budgets and running caps across the whole
// fleet, however many processes run, at three levels (Level): the global
// level, an account shared by any number of routes, and a route. A call
// budget is a cap on calls in flight and an optional rate, separately for
// submit calls and for status (and cancel) calls, so status polls never
// eat the submit quota; a call takes a lease at every level (Chain). A
// running cap limits the jobs created at the provider and not yet ended
// (running.go). The same two mechanisms hold the apps: an app's caps on
// its jobs running and waiting are levels of running slots of its own
// (apps.go), and the request quotas of apps and front door tokens are
// rate budgets (quota.go).
//
// A budget is cap lease messages on the work-queue stream POLLUX_SLOTS,
// lease i on subject pollux.slots.<scope>.<kind>.<i> (events.Scope) (the stream keeps at
// most one message per subject), and a durable consumer over them. To call
// the provider a worker fetches one lease, makes the call and returns the
// lease with NakWithDelay(cooldown): cooldown is cap/rate, so each lease is
// used at most rate/cap times a second and the route sees at most rate calls
// a second. A process that dies holding a lease loses it only until the
// lease's ack wait passes; a call that runs long extends it (InProgress).
// The leases are a consumer of their own on purpose: nak-delayed checks stay
// ack-pending and would fill any cap set on the checks consumer.
//
// The number of lease messages is the cap: JetStream redelivers a returned
// (nak'd) message without looking at MaxAckPending, which only gates first
// deliveries (nats-server consumer.go getNextMsg). One subject per lease makes
// adding leases idempotent — processes starting together cannot add more
// than cap — and the consumer's MaxAckPending = cap is a second guard.
//
// Changing a budget in the configuration takes effect when any one process
// restarts: it adds the missing leases, or deletes those past the new cap
// (by sequence; a call holding one finishes, its lease is not returned), and
// updates MaxAckPending. Leases below the cap are kept.
//
// The budgets are a route's (package route): services never take a lease
// or a running slot themselves; the route's gate (route.Gate) does,
// around the provider call it makes.
package budget

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/consume"
	"github.com/pollux-dev/pollux/pkg/events"
)

// Limit is one budget: calls in flight and calls per second. Zero fields
// mean no limit of that kind.
type Limit struct {
	// Concurrency caps the calls in flight across the fleet.
	Concurrency int
	// Rate caps the calls per second across the fleet.
	Rate float64
	// LeaseWait is how long a lease may be held before it returns on its
	// own when its holder died (default DefaultLeaseWait).
	LeaseWait time.Duration
	// Learn learns the rate from the provider's refusals (learn.go),
	// never above Rate.
	Learn bool
}

// IsZero reports whether the limit limits nothing, and learns nothing.
func (l Limit) IsZero() bool { return l.Concurrency <= 0 && l.Rate <= 0 && !l.Learn }

// leases is how many lease messages a limit needs, and cooldown how long a
// returned lease rests before its next use.
func (l Limit) leases() (n int, cooldown time.Duration) {
	n = l.Concurrency
	if n <= 0 {
		n = max(1, int(math.Ceil(l.Rate))) // rate only: a second's worth of calls in flight at most
	}
	if l.Rate > 0 {
		cooldown = time.Duration(float64(n) / l.Rate * float64(time.Second))
	}
	return n, cooldown
}

// Defaults.
const (
	// DefaultLeaseWait is how long a lease may be held before it returns on
	// its own (the crash lease); calls longer than a third of it extend it.
	DefaultLeaseWait = 60 * time.Second
	// DefaultWait bounds the wait for a lease.
	DefaultWait = 5 * time.Second
)

// ErrBusy is returned when no lease came free within the wait.
var ErrBusy = errors.New("budget exhausted: no call slot came free in time")

// Reuse of a lease within a process (budgets without a rate only): a
// released lease stays with the process for up to reuseIdle, and the
// process's next Acquire takes it without asking the server, up to
// reuseMax calls in a row; then it goes back to the fleet. A busy process
// thus asks the server for a lease once per reuseMax calls instead of
// twice per call, while a lease is never idle in one process for longer
// than reuseIdle. The cap is unchanged: a reused lease is still one lease.
const (
	reuseMax  = 16
	reuseIdle = 10 * time.Millisecond
)

// Budget is one scope's budget of one kind (a route's, an account's, the
// global one: see Level). A nil *Budget limits nothing.
type Budget struct {
	scope, kind string
	// level names the scope in errors ("route x", "account y", "global").
	level string
	cons  jetstream.Consumer
	// cooldown is how long a returned lease rests (nanoseconds), open
	// that calls need no lease: both change as a learned rate does.
	cooldown  atomic.Int64
	open      atomic.Bool
	learner   *learner // nil: the rate is as configured
	leaseWait time.Duration
	// Wait bounds Acquire (default DefaultWait).
	Wait time.Duration

	mu   sync.Mutex
	idle []*Lease // released leases kept for reuse, newest last
}

// Ensure sets up the budget of a scope (events.Scope; a route's scope is
// its name) and kind (events.SlotSubmit or events.SlotStatus) and returns
// it; nil when the limit limits nothing.
func Ensure(ctx context.Context, js jetstream.JetStream, ns events.Namespace, slots jetstream.Stream,
	scope, kind string, l Limit, o events.Options) (*Budget, error) {
	if l.IsZero() {
		return nil, nil
	}
	return ensure(ctx, js, ns, slots, scope, kind, l, o, "route "+scope, zerolog.Nop())
}

func ensure(ctx context.Context, js jetstream.JetStream, ns events.Namespace, slots jetstream.Stream,
	scope, kind string, l Limit, o events.Options, level string, log zerolog.Logger) (*Budget, error) {
	n, cooldown := l.leases()
	most := n
	if l.Learn && l.Concurrency <= 0 {
		most = maxLearnLeases // a learned rate sets the leases
	}
	leaseWait := cmp.Or(l.LeaseWait, DefaultLeaseWait)
	cons, err := events.EnsureConsumer(ctx, slots, ns.BudgetConsumerConfig(scope, kind, most, leaseWait, o))
	if err != nil {
		return nil, fmt.Errorf("%s budget of %s: %w", kind, level, err)
	}
	b := &Budget{scope: scope, level: level, kind: kind, cons: cons, leaseWait: leaseWait}
	if l.Learn {
		if err := b.learn(ctx, js, ns, slots, events.LimitsKey(scope, kind), l, log); err != nil {
			return nil, fmt.Errorf("%s budget of %s: %w", kind, level, err)
		}
		return b, nil
	}
	if err := setLeases(ctx, js, ns, slots, scope, kind, n); err != nil {
		return nil, fmt.Errorf("%s budget of %s: %w", kind, level, err)
	}
	b.cooldown.Store(int64(cooldown))
	return b, nil
}

// setLeases makes leases 0..n-1 exist and removes any beyond.
func setLeases(ctx context.Context, js jetstream.JetStream, ns events.Namespace, slots jetstream.Stream, route, kind string, n int) error {
	info, err := slots.Info(ctx, jetstream.WithSubjectFilter(ns.Slots(route, kind)))
	if err != nil {
		return err
	}
	have := info.State.Subjects
	for i := range n {
		subject := ns.Slot(route, kind, i)
		if have[subject] > 0 {
			continue
		}
		// Refused with CodeStoreFailed: another process added it first.
		if _, err := js.Publish(ctx, subject, nil); err != nil && !events.IsAPIError(err, events.CodeStoreFailed) {
			return fmt.Errorf("add lease %d: %w", i, err)
		}
	}
	for subject := range have {
		i, err := strconv.Atoi(subject[strings.LastIndexByte(subject, '.')+1:])
		if err != nil || i < n {
			continue
		}
		m, err := slots.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("remove lease %d: %w", i, err)
		}
		if err := slots.DeleteMsg(ctx, m.Sequence); err != nil && !(errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) && gone(ctx, slots, subject, m.Sequence)) {
			return fmt.Errorf("remove lease %d: %w", i, err)
		}
	}
	return nil
}

// gone reports whether the lease at seq has left the stream: a delete that
// JetStream refused because another process removed it first (it says "no
// message found" without a code nats.go exposes).
func gone(ctx context.Context, slots jetstream.Stream, subject string, seq uint64) bool {
	m, err := slots.GetLastMsgForSubject(ctx, subject)
	return errors.Is(err, jetstream.ErrMsgNotFound) || (err == nil && m.Sequence != seq)
}

// Lease is permission to make one call. Release it when the call is done.
type Lease struct {
	b    *Budget
	msg  jetstream.Msg
	keep func() // stops extending the lease
	uses int
	// expire returns the lease to the fleet once it has been idle for
	// reuseIdle.
	expire *time.Timer
}

// Acquire waits up to Wait for a lease. It returns ErrBusy when none came
// free, or ctx's error.
func (b *Budget) Acquire(ctx context.Context) (*Lease, error) {
	if b == nil {
		return nil, nil
	}
	if b.open.Load() {
		return &Lease{b: b}, nil // learning, and nothing limits it yet
	}
	if l := b.reuse(); l != nil {
		return l, nil
	}
	wait := cmp.Or(b.Wait, DefaultWait)
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	if wait < 10*time.Millisecond {
		return nil, ErrBusy
	}
	start := time.Now()
	// The fetch ends with ctx (a stopping process does not wait it out);
	// the server's request expires a little before wait does.
	fctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	batch, err := b.cons.Fetch(1, jetstream.FetchContext(fctx))
	if err != nil {
		return nil, fmt.Errorf("%s budget of %s: %w", b.kind, b.level, err)
	}
	if msg, ok := <-batch.Messages(); ok { // one at most, or none when the wait ran out
		if b.learner != nil && time.Since(start) > waited {
			b.learner.waitedAt.Store(time.Now().UnixNano())
		}
		// A long call extends its lease.
		return &Lease{b: b, msg: msg, keep: consume.KeepAlive(msg, b.leaseWait/3)}, nil
	}
	if b.learner != nil {
		b.learner.waitedAt.Store(time.Now().UnixNano())
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("%s budget of %s: %w", b.kind, b.level, err)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, ErrBusy
}

// reuse takes an idle lease of this process, if there is one.
func (b *Budget) reuse() *Lease {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.idle)
	if n == 0 {
		return nil
	}
	l := b.idle[n-1]
	b.idle = b.idle[:n-1]
	l.expire.Stop() // if it fired already, giveBack finds the lease taken
	return l
}

// Release returns the lease after a call the provider took (or answered
// with anything but a refusal: see Refused), to be used again after the
// budget's cooldown. Releasing a nil lease does nothing.
func (l *Lease) Release() { l.done(false) }

// Refused returns the lease after a call the provider refused with a rate
// limit that named no Retry-After: a budget that learns its rate lowers
// it (learn.go).
func (l *Lease) Refused() { l.done(true) }

// done returns a lease after its call, teaching a learning budget what
// the answer was.
func (l *Lease) done(refused bool) {
	if l == nil {
		return
	}
	if lr := l.b.learner; lr != nil {
		lr.calls.add(time.Now())
		if refused {
			lr.refused()
		} else {
			lr.succeeded()
		}
	}
	l.giveUp()
}

// giveUp returns a lease that was used.
func (l *Lease) giveUp() {
	b := l.b
	if l.msg == nil {
		return // taken while the budget was open
	}
	l.uses++
	if b.cooldown.Load() == 0 && l.uses < reuseMax {
		b.mu.Lock()
		b.idle = append(b.idle, l)
		if l.expire == nil {
			l.expire = time.AfterFunc(reuseIdle, func() { b.giveBack(l) })
		} else {
			l.expire.Reset(reuseIdle)
		}
		b.mu.Unlock()
		return
	}
	l.toFleet()
}

// Unused returns a lease that made no call (the work turned out to need
// none): it goes back at once, without its cooldown, as it spent no call
// of the rate.
func (l *Lease) Unused() {
	if l == nil || l.msg == nil {
		return
	}
	if l.b.cooldown.Load() == 0 {
		l.giveUp()
		return
	}
	l.keep()
	_ = l.msg.Nak()
}

// giveBack returns an idle lease to the fleet, unless it was taken again.
func (b *Budget) giveBack(l *Lease) {
	b.mu.Lock()
	i := slices.Index(b.idle, l)
	if i < 0 {
		b.mu.Unlock()
		return
	}
	b.idle = slices.Delete(b.idle, i, i+1)
	b.mu.Unlock()
	l.toFleet()
}

// toFleet stops extending the lease and returns it to the server.
func (l *Lease) toFleet() {
	l.keep()
	if d := time.Duration(l.b.cooldown.Load()); d > 0 {
		_ = l.msg.NakWithDelay(d)
		return
	}
	_ = l.msg.Nak()
}

// Close returns the process's idle leases to the fleet at once (at
// shutdown, so that they do not wait out their lease wait). Leases still in
// use are returned by their Release.
func (b *Budget) Close() {
	if b == nil {
		return
	}
	if b.learner != nil {
		b.learner.close()
	}
	b.mu.Lock()
	idle := b.idle
	b.idle = nil
	b.mu.Unlock()
	for _, l := range idle {
		l.expire.Stop()
		l.toFleet()
	}
}
