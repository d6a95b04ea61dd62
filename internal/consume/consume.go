// Package consume runs a pull consumer with bounded concurrency: at most
// Workers handlers run at once and at most Workers more messages wait in the
// client's buffer, each handler's Outcome is settled on its message, fetching
// holds off while the caller says so (a paused route), and on shutdown the
// buffered messages are handled and the handlers in flight waited for.
// While a handler runs longer than a third of the consumer's ack wait, its
// message is kept (InProgress), so the ack wait only has to outlast a dead
// process, never a slow call.
package consume

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/pkg/events"
)

// Handler handles one message and says what to do with it.
type Handler func(ctx context.Context, msg jetstream.Msg) events.Outcome

// Options configure Run. The zero value means the defaults on each field.
type Options struct {
	// Workers is the most handlers in flight, and the most messages
	// buffered in the client (default 8).
	Workers int
	// Hold, when it returns a positive duration, stops taking messages for
	// that long (a paused route).
	Hold func() time.Duration
	// Drain bounds the handling of buffered and in-flight messages at
	// shutdown before their context is canceled (default 15s).
	Drain time.Duration
	// Settled observes each settled outcome and the handler's duration.
	Settled func(events.Outcome, time.Duration)
	// Logger receives consumer errors.
	Logger zerolog.Logger
}

// pullExpiry is how long a pull request waits at the server; the server
// sends a heartbeat every half of it.
const pullExpiry = 10 * time.Second

// ErrConsumerGone is returned by Run when its consumer was deleted while in
// use (by an operator, or by a process repartitioning the checks).
var ErrConsumerGone = errors.New("the consumer was deleted")

// Run consumes until ctx ends, or until the consumer is deleted
// (ErrConsumerGone). Handlers run with a context that outlives ctx by up to
// Drain, so work under way at shutdown (a provider call, a state write) can
// finish.
func Run(ctx context.Context, c jetstream.Consumer, o Options, h Handler) error {
	r := &runner{
		c: c, h: h, o: o,
		workers: cmp.Or(o.Workers, 8),
		drain:   cmp.Or(o.Drain, 15*time.Second),
		keep:    cmp.Or(c.CachedInfo().Config.AckWait, 30*time.Second) / 3,
	}
	r.work, r.cancelWork = context.WithCancel(context.WithoutCancel(ctx))
	defer r.cancelWork()
	r.slots = make(chan struct{}, r.workers)
	r.jobs = make(chan jetstream.Msg)
	r.held = make([]held, r.workers)
	for w := range r.workers {
		r.wg.Add(1)
		go r.worker(&r.held[w])
	}
	stopKeeping := r.keepAll()
	defer stopKeeping()
	return r.run(ctx)
}

// Recreate runs Run on c and, whenever the consumer is deleted while in
// use, creates it again with ensure and goes on.
func Recreate(ctx context.Context, c jetstream.Consumer, ensure func(context.Context) (jetstream.Consumer, error), o Options, h Handler) error {
	for {
		err := Run(ctx, c, o, h)
		if ctx.Err() != nil || !errors.Is(err, ErrConsumerGone) {
			return err
		}
		o.Logger.Warn().Err(err).Msg("the consumer was deleted while in use; creating it again")
		sleep(ctx, time.Second)
		if c, err = ensure(ctx); err != nil {
			return err
		}
	}
}

type runner struct {
	c          jetstream.Consumer
	h          Handler
	o          Options
	workers    int
	drain      time.Duration
	keep       time.Duration // InProgress interval
	slots      chan struct{} // one per message fetched and not yet handled
	jobs       chan jetstream.Msg
	held       []held         // what each worker handles
	wg         sync.WaitGroup // the workers
	work       context.Context
	cancelWork context.CancelFunc
}

func (r *runner) run(ctx context.Context) error {
	var it jetstream.MessagesContext
	defer func() {
		if it != nil {
			r.finish(it)
		}
		close(r.jobs)
		r.wait()
	}()
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		if it == nil {
			var err error
			// Missing heartbeats are reported (within 2×5s) so that a
			// consumer deleted while no pull request waited on it is
			// noticed, not waited on forever.
			it, err = r.c.Messages(jetstream.PullMaxMessages(r.workers), jetstream.PullExpiry(pullExpiry),
				jetstream.WithMessagesErrOnMissingHeartbeat(true))
			if err != nil {
				it = nil
				if r.gone(ctx) {
					return fmt.Errorf("%s: %w", r.c.CachedInfo().Name, ErrConsumerGone)
				}
				backoff = r.pause(ctx, backoff, err, "starting the consumer failed")
				continue
			}
		}
		if r.o.Hold != nil {
			if d := r.o.Hold(); d > 0 {
				sleep(ctx, d)
				continue
			}
		}
		select {
		case r.slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			<-r.slots
			if ctx.Err() != nil {
				return nil
			}
			if r.gone(ctx) {
				return fmt.Errorf("%s: %w", r.c.CachedInfo().Name, ErrConsumerGone)
			}
			if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				it = nil // the connection closed: start over
			}
			backoff = r.pause(ctx, backoff, err, "taking the next message failed")
			continue
		}
		backoff = 0
		r.dispatch(msg)
	}
	return nil
}

// gone asks the server whether the consumer still exists; when the server
// cannot be asked, the consumer is presumed to exist.
func (r *runner) gone(ctx context.Context) bool {
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := r.c.Info(ictx)
	return errors.Is(err, jetstream.ErrConsumerNotFound)
}

// dispatch hands msg to an idle worker. The caller holds a slot for it,
// so at most Workers-1 workers are busy and one is free to take it.
func (r *runner) dispatch(msg jetstream.Msg) { r.jobs <- msg }

// worker handles messages until the runner stops. Workers live as long as
// the runner: a goroutine per message would grow a fresh stack for every
// check (stack copying was a tenth of the poller's CPU).
func (r *runner) worker(h *held) {
	defer r.wg.Done()
	for msg := range r.jobs {
		start := time.Now()
		h.set(msg, start)
		out := r.h(r.work, msg)
		h.set(nil, time.Time{})
		if err := out.Settle(msg); err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
			r.o.Logger.Warn().Err(err).Str("subject", msg.Subject()).Stringer("outcome", out).Msg("settle failed")
		}
		if r.o.Settled != nil {
			r.o.Settled(out, time.Since(start))
		}
		<-r.slots
	}
}

// held is the message a worker is handling, and since when.
type held struct {
	mu    sync.Mutex
	msg   jetstream.Msg
	since time.Time
	kept  time.Time // the latest InProgress sent for msg
}

func (h *held) set(msg jetstream.Msg, since time.Time) {
	h.mu.Lock()
	h.msg, h.since, h.kept = msg, since, since
	h.mu.Unlock()
}

// keepAll sends InProgress for each message handled for longer than half
// the keep interval, every half interval: one ticker for the runner instead
// of a timer per message. A message is kept within one interval of its
// start and then at least every interval, well inside the ack wait (three
// intervals).
func (r *runner) keepAll() (stop func()) {
	half := r.keep / 2
	t := time.NewTicker(half)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				for i := range r.held {
					r.held[i].keepIfDue(now, half)
				}
			}
		}
	}()
	return func() { t.Stop(); close(done) }
}

func (h *held) keepIfDue(now time.Time, every time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.msg != nil && now.Sub(h.kept) >= every {
		if h.msg.InProgress() == nil {
			h.kept = now
		}
	}
}

// finish stops pulling and handles what is already in the client's buffer,
// so nothing fetched waits out its ack wait.
func (r *runner) finish(it jetstream.MessagesContext) {
	it.Drain()
	deadline := time.Now().Add(r.drain)
	for time.Now().Before(deadline) {
		r.slots <- struct{}{}
		msg, err := it.Next(jetstream.NextMaxWait(time.Until(deadline)))
		if err != nil {
			<-r.slots
			return
		}
		r.dispatch(msg)
	}
	it.Stop()
}

// wait waits for the handlers in flight, canceling them after Drain.
func (r *runner) wait() {
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	t := time.NewTimer(r.drain)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		r.cancelWork()
		<-done
	}
}

func (r *runner) pause(ctx context.Context, backoff time.Duration, err error, what string) time.Duration {
	backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
	r.o.Logger.Warn().Err(err).Dur("retry_in", backoff).Msg(what)
	sleep(ctx, backoff)
	return backoff
}

// KeepAlive tells the server every interval that msg is still being worked
// on (InProgress), so its ack wait does not pass, until the returned stop
// is called. It costs a timer, no goroutine, until the first interval.
func KeepAlive(msg jetstream.Msg, every time.Duration) (stop func()) {
	k := &keeper{msg: msg, every: every}
	k.arm()
	return k.stop
}

type keeper struct {
	msg     jetstream.Msg
	every   time.Duration
	stopped atomic.Bool
	t       atomic.Pointer[time.Timer]
}

func (k *keeper) arm() { k.t.Store(time.AfterFunc(k.every, k.fire)) }

func (k *keeper) fire() {
	if !k.stopped.Load() && k.msg.InProgress() == nil {
		k.arm()
	}
}

func (k *keeper) stop() {
	k.stopped.Store(true)
	if t := k.t.Load(); t != nil {
		t.Stop()
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
