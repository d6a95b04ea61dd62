// Package consume runs a pull consumer with bounded concurrency: at most
// Workers handlers run at once and at most Buffer more messages wait for
// one, each handler's Outcome is settled on its message, fetching holds off
// while the caller says so (a paused route), and on shutdown the messages
// fetched, and those the fetches under way still bring, are handled and the
// handlers in flight waited for: a shutdown leaves no message to wait out
// its ack wait.
//
// Messages are fetched in batches sized to the room left, so a message is
// never in the client without a place: every message fetched and not yet
// settled — waiting for a worker or being handled — is kept (InProgress)
// once it has been held for half of a third of the consumer's ack wait, so
// the ack wait only has to outlast a dead process, never a slow call or a
// long queue. A new fetch is sent when half the room is free, so each pull
// request brings many messages (pull requests are what a clustered
// consumer pays most for).
//
// Given its stream, Run also removes now and then the messages the server
// failed to remove after the consumer acknowledged them (SweepOrphans).
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
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/schedule"
)

// Handler handles one message and says what to do with it.
type Handler func(ctx context.Context, msg jetstream.Msg) events.Outcome

// Options configure Run. The zero value means the defaults on each field.
type Options struct {
	// Workers is the most handlers in flight (default 8).
	Workers int
	// Buffer is the most messages fetched and waiting for a worker
	// (default 3 × Workers).
	Buffer int
	// Hold, when it returns a positive duration, stops taking messages for
	// that long (a paused route).
	Hold func() time.Duration
	// Drain bounds the handling of fetched and in-flight messages at
	// shutdown before their context is canceled (default 15s).
	Drain time.Duration
	// Settled observes each settled outcome and the handler's duration.
	Settled func(events.Outcome, time.Duration)
	// Stream is the consumer's stream. When it is a work-queue stream, Run
	// removes the messages the consumer acknowledged that it still stores
	// (see SweepOrphans) every Sweep.
	Stream jetstream.Stream
	// Sweep is how often to look for such orphans (default DefaultSweep;
	// negative: never).
	Sweep time.Duration
	// Swept observes the orphans a sweep removed (only when it removed
	// some).
	Swept func(n int)
	// Logger receives consumer errors.
	Logger zerolog.Logger
}

// fetchWait is how long a fetch waits at the server for its batch to fill
// (the server then ends it; the client gives up a second later if that end
// is lost). It bounds how long a shutdown waits
// for the fetches under way, and how long a fetch sent to a server that
// went away is waited for after a reconnect; an idle consumer costs one
// pull request per fetchWait.
const fetchWait = 2 * time.Second

// ErrConsumerGone is returned by Run when its consumer was deleted while in
// use (by an operator, or by a process repartitioning the checks).
var ErrConsumerGone = errors.New("the consumer was deleted")

// Run consumes until ctx ends, or until the consumer is deleted
// (ErrConsumerGone). Handlers run with a context that outlives ctx by up to
// Drain, so work under way at shutdown (a provider call, a state write) can
// finish.
func Run(ctx context.Context, c jetstream.Consumer, o Options, h Handler) error {
	workers := cmp.Or(o.Workers, 8)
	room := workers + cmp.Or(o.Buffer, 3*workers)
	r := &runner{
		c: c, h: h, o: o,
		workers:  workers,
		minFetch: max(1, room/2),
		drain:    cmp.Or(o.Drain, 15*time.Second),
		keep:     cmp.Or(c.CachedInfo().Config.AckWait, 30*time.Second) / 3,
		slots:    make([]held, room),
		free:     make(chan int, room),
		jobs:     make(chan int, room),
		wake:     make(chan struct{}, 1),
		errs:     make(chan error, 1),
	}
	for i := range room {
		r.free <- i
	}
	r.avail.Store(int64(room))
	r.work, r.cancelWork = context.WithCancel(context.WithoutCancel(ctx))
	defer r.cancelWork()
	for range r.workers {
		r.wg.Add(1)
		go r.worker()
	}
	stopKeeping := r.keepAll()
	defer stopKeeping()
	stopSweeping := r.sweeping(ctx)
	defer stopSweeping()
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
		schedule.Sleep(ctx, time.Second)
		if c, err = ensure(ctx); err != nil {
			return err
		}
	}
}

// A runner's room is its slots: a message takes one when it arrives and
// gives it back when its outcome is settled. avail is the room neither
// taken nor asked for by a fetch under way; only the fetch loop lowers it.
type runner struct {
	c          jetstream.Consumer
	h          Handler
	o          Options
	workers    int
	minFetch   int // the least room a fetch asks for
	drain      time.Duration
	keep       time.Duration // InProgress interval
	slots      []held
	free       chan int      // slots without a message
	jobs       chan int      // slots whose message waits for a worker, in order
	avail      atomic.Int64  // room not taken nor asked for
	wake       chan struct{} // room came free, or a fetch ended
	errs       chan error    // a fetch's failure, for the loop
	progressed atomic.Bool   // a fetch brought messages: failures are over
	fetches    sync.WaitGroup
	wg         sync.WaitGroup // the workers
	work       context.Context
	cancelWork context.CancelFunc
}

func (r *runner) run(ctx context.Context) error {
	defer func() {
		// Stop asking, and let the fetches under way end on their own
		// (within fetchWait), handling what they bring. Ending one early
		// would only drop its inbox: the server, which still holds the
		// pull request, may have messages on the way to it, and those
		// would wait out the ack wait before anyone got them again.
		r.fetches.Wait()
		close(r.jobs)
		r.wait()
	}()
	backoff := time.Duration(0)
	// failed handles a failure to fetch: ErrConsumerGone when the consumer
	// is gone, else nil after a growing wait before the next try.
	failed := func(err error) error {
		if r.gone(ctx) {
			return fmt.Errorf("%s: %w", r.c.CachedInfo().Name, ErrConsumerGone)
		}
		backoff = r.pause(ctx, backoff, err, "fetching messages failed")
		return nil
	}
	for ctx.Err() == nil {
		if r.progressed.Swap(false) {
			backoff = 0
		}
		select {
		case err := <-r.errs: // a fetch failed (it also woke the loop)
			if gone := failed(err); gone != nil {
				return gone
			}
			continue
		default:
		}
		if r.o.Hold != nil {
			if d := r.o.Hold(); d > 0 {
				schedule.Sleep(ctx, d)
				continue
			}
		}
		n := r.avail.Load()
		if n < int64(r.minFetch) {
			select {
			case <-r.wake:
			case <-ctx.Done():
			}
			continue
		}
		r.avail.Add(-n)
		// No context: canceling a fetch would not end it at the server.
		batch, err := r.c.Fetch(int(n), jetstream.FetchMaxWait(fetchWait))
		if err != nil {
			r.avail.Add(n)
			if gone := failed(err); gone != nil {
				return gone
			}
			continue
		}
		r.fetches.Add(1)
		go r.receive(batch, n)
	}
	return nil
}

// receive puts each message of a fetch in a slot and in line for a worker,
// gives back the room asked for and not filled, and reports a failure.
func (r *runner) receive(batch jetstream.MessageBatch, asked int64) {
	defer r.fetches.Done()
	got := int64(0)
	for msg := range batch.Messages() {
		i := <-r.free // never waits: the fetch asked only for free room
		r.slots[i].set(msg, time.Now())
		r.jobs <- i
		got++
	}
	if got < asked {
		r.avail.Add(asked - got)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		select {
		case r.errs <- err:
		default: // one failure at a time is enough to act on
		}
	}
	if got > 0 {
		r.progressed.Store(true)
	}
	r.signal()
}

// signal wakes the fetch loop if it waits for room.
func (r *runner) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// gone asks the server whether the consumer still exists; when the server
// cannot be asked, the consumer is presumed to exist.
func (r *runner) gone(ctx context.Context) bool {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := r.c.Info(ictx)
	return errors.Is(err, jetstream.ErrConsumerNotFound)
}

// worker handles messages in the order they came until the runner stops.
// Workers live as long as the runner: a goroutine per message would grow a
// fresh stack for every check (stack copying was a tenth of the poller's
// CPU).
func (r *runner) worker() {
	defer r.wg.Done()
	for i := range r.jobs {
		h := &r.slots[i]
		msg := h.take()
		start := time.Now()
		out := r.h(r.work, msg)
		h.set(nil, time.Time{}) // no keep-alive from here: it would race the settle
		if err := out.Settle(msg); err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
			r.o.Logger.Warn().Err(err).Str(logkey.Subject, msg.Subject()).Stringer(logkey.Outcome, out).Msg("settle failed")
		}
		if r.o.Settled != nil {
			r.o.Settled(out, time.Since(start))
		}
		r.free <- i
		r.avail.Add(1)
		r.signal()
	}
}

// held is the message in a slot, and since when the client has it.
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

func (h *held) take() jetstream.Msg {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.msg
}

// keepAll sends InProgress for each message held for longer than half the
// keep interval, every half interval: one ticker for the runner instead of
// a timer per message. A message is kept within one interval of its
// arrival and then at least every interval, well inside the ack wait
// (three intervals), whether it waits for a worker or is being handled.
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
				for i := range r.slots {
					r.slots[i].keepIfDue(now, half)
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

// wait waits for the handlers in flight and the messages in line,
// canceling them after Drain.
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
	r.o.Logger.Warn().Err(err).Dur(logkey.RetryIn, backoff).Msg(what)
	schedule.Sleep(ctx, backoff)
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
