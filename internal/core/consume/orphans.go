package consume

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/schedule"
)

// Orphans are messages a work-queue stream still stores although its
// consumer has acknowledged them: the consumer's ack floor is past them, so
// they are never delivered again, yet they stay until the stream's MaxAge.
// nats-server 2.15.2 leaves one behind when an ack arrives while the server
// shuts down gracefully: the stream is marked closed before its consumers
// stop, the consumer records the ack and the stream skips the removal
// (stream.go: stop, ackMsg); at restart only interest streams are checked
// for such messages, work queues are not (jetstream.go:
// checkForOrphanMsgs), and only a clustered stream rechecks periodically.
// Measured here: 1 orphan in 20 restarts under 20,000 acks. An orphaned
// check counts as a tracked job for good, and an orphaned delivery
// counts as webhook backlog for good, so Run sweeps them (Options.Stream).

// DefaultSweep is how often Run looks for orphans of its consumer.
const DefaultSweep = 30 * time.Second

// sweepBatch bounds the orphans one sweep removes; the next sweep goes on.
const sweepBatch = 1000

// sweepTimeout bounds one sweep's NATS calls.
const sweepTimeout = 10 * time.Second

// SweepOrphans removes from stream the messages consumer c has
// acknowledged that the stream still stores, up to sweepBatch of them, and
// returns how many it removed. Only on a work-queue stream is that right
// (Run checks): elsewhere acknowledged messages are kept on purpose. It
// does nothing for a consumer that did not start at the stream's first
// message (its ack floor then says nothing about the messages before its
// start). A message the server removes meanwhile is not an error.
func SweepOrphans(ctx context.Context, stream jetstream.Stream, c jetstream.Consumer) (int, error) {
	ci, err := c.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("sweep orphans: %w", err)
	}
	floor := ci.AckFloor.Stream
	if floor == 0 || ci.Config.DeliverPolicy != jetstream.DeliverAllPolicy {
		return 0, nil
	}
	filters := ci.Config.FilterSubjects
	if ci.Config.FilterSubject != "" {
		filters = []string{ci.Config.FilterSubject}
	}
	if len(filters) == 0 {
		filters = []string{">"}
	}
	removed := 0
	for _, filter := range filters {
		for seq := uint64(1); removed < sweepBatch; {
			m, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				return removed, fmt.Errorf("sweep orphans of %s: %w", ci.Name, err)
			}
			if m.Sequence > floor {
				break // not acknowledged yet: a live message
			}
			err = stream.DeleteMsg(ctx, m.Sequence)
			switch {
			case err == nil:
				removed++
			case !errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful): // refused: gone meanwhile
				return removed, fmt.Errorf("sweep orphans of %s: remove %d: %w", ci.Name, m.Sequence, err)
			}
			seq = m.Sequence + 1
		}
	}
	return removed, nil
}

// sweeping sweeps the orphans of r's consumer every Sweep (jittered by up
// to a tenth, so processes do not sweep in step) until stop is called. It
// sweeps only work-queue streams, where a message belongs to one consumer:
// a limits stream keeps what was acknowledged on purpose, and an interest
// stream keeps a message one consumer acknowledged for the others.
func (r *runner) sweeping(ctx context.Context) (stop func()) {
	every := r.o.Sweep
	if r.o.Stream == nil || every < 0 || r.o.Stream.CachedInfo().Config.Retention != jetstream.WorkQueuePolicy {
		return func() {}
	}
	if every == 0 {
		every = DefaultSweep
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			schedule.Sleep(ctx, every+rand.N(every/10+1))
			if ctx.Err() != nil {
				return
			}
			sctx, scancel := context.WithTimeout(ctx, sweepTimeout)
			n, err := SweepOrphans(sctx, r.o.Stream, r.c)
			scancel()
			switch {
			case err != nil && ctx.Err() == nil:
				r.o.Logger.Warn().Err(err).Msg("sweeping orphaned messages failed")
			case n > 0:
				if r.o.Swept != nil {
					r.o.Swept(n)
				}
				r.o.Logger.Info().Int(logkey.Removed, n).Str(logkey.Consumer, r.c.CachedInfo().Name).
					Msg("removed messages the consumer had acknowledged and the stream still stored (left by a NATS server shutdown)")
			}
		}
	}()
	return func() { cancel(); <-done }
}
