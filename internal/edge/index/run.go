package index

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
)

// Retry waits after a failure to read the stream, doubling to the most.
const (
	retryFirst = 100 * time.Millisecond
	retryMost  = 2 * time.Second
)

// resetAttempts is how often the ordered consumer tries to reset itself
// before Run takes over.
const resetAttempts = 2

// caughtUpCheck is how often Run, not yet caught up, asks the stream
// whether what it waits for is still there.
const caughtUpCheck = time.Second

// Run reads the events stream with an ordered consumer from its first
// message and applies every message to the index, until ctx ends (it
// then returns nil). It closes ready (if not nil) once it has applied
// everything the stream held when Run started. When reading fails (NATS
// restarts, the connection drops) it reads again from the message after
// the last it applied, waiting a little longer after each failure. Run
// may be called again after it returned (it goes on from where it
// stopped), not twice at once.
func (x *Index) Run(ctx context.Context, ready chan<- struct{}) error {
	var once sync.Once
	r := &reader{x: x, ready: func() {
		if ready != nil {
			once.Do(func() { close(ready) })
		}
	}}
	wait := retryFirst
	for {
		err := r.follow(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if r.progressed {
			wait = retryFirst
		}
		x.log.Warn().Err(err).Uint64(logkey.StreamSeq, x.applied.Load()).Dur(logkey.RetryIn, wait).Msg("reading the events stream failed; resuming after the last event applied")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, retryMost)
	}
}

// reader is one Run's state.
type reader struct {
	x          *Index
	ready      func()
	target     uint64 // the stream's last sequence when Run started
	known      bool   // target is known
	done       bool   // ready is closed
	progressed bool   // the latest follow applied something
}

// follow reads the stream from the message after the last applied, until
// ctx ends or reading fails.
func (r *reader) follow(ctx context.Context) error {
	r.progressed = false
	x := r.x
	if !r.done && !r.known {
		if err := r.check(ctx); err != nil {
			return err
		}
	}
	// The consumer resets itself after a short outage; after a longer one
	// Run resumes it (sooner than the consumer's own backoff would).
	cfg := jetstream.OrderedConsumerConfig{MaxResetAttempts: resetAttempts}
	if seq := x.applied.Load(); seq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, seq+1
	}
	cons, err := x.js.OrderedConsumer(ctx, x.stream, cfg)
	if err != nil {
		return fmt.Errorf("ordered consumer on %s: %w", x.stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("read %s: %w", x.stream, err)
	}
	defer it.Stop()
	for {
		nctx, cancel := ctx, context.CancelFunc(func() {})
		if !r.done {
			nctx, cancel = context.WithTimeout(ctx, caughtUpCheck)
		}
		msg, err := it.Next(jetstream.NextContext(nctx))
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && !r.done && errors.Is(err, context.DeadlineExceeded):
			// Nothing for a while: the messages waited for may have aged
			// out, or the last ones were not events of a job.
			if err := r.check(ctx); err != nil {
				return err
			}
			continue
		case err != nil:
			return fmt.Errorf("read %s: %w", x.stream, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			x.garbage.Add(1)
			x.log.Debug().Err(err).Str(logkey.Subject, msg.Subject()).Msg("ignored a message without metadata")
			continue
		}
		seq := md.Sequence.Stream
		if seq <= x.applied.Load() {
			continue // read again after a resumption
		}
		x.handle(msg.Subject(), msg.Data(), seq)
		x.applied.Store(seq)
		r.progressed = true
		if !r.done && (seq >= r.target || md.NumPending == 0) {
			r.done = true
			r.ready()
		}
	}
}

// check asks the stream for its last sequence and closes ready when the
// index has it already (or the stream is empty).
func (r *reader) check(ctx context.Context) error {
	s, err := r.x.js.Stream(ctx, r.x.stream)
	if err != nil {
		return fmt.Errorf("stream %s: %w", r.x.stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return fmt.Errorf("stream %s: %w", r.x.stream, err)
	}
	if !r.known {
		r.target, r.known = info.State.LastSeq, true
	}
	if info.State.Msgs == 0 || r.x.applied.Load() >= min(r.target, info.State.LastSeq) {
		r.done = true
		r.ready()
	}
	return nil
}

// handle applies one message of the events stream, at sequence seq.
func (x *Index) handle(subject string, data []byte, seq uint64) {
	route, job, ok := x.eventSubject(subject)
	if !ok {
		x.ignore(subject, errors.New("not an events subject"))
		return
	}
	if job == "" {
		ev, err := events.DecodeRouteEvent(data)
		if err == nil && ev.Route != route {
			err = fmt.Errorf("route %q on the subject of route %q", ev.Route, route)
		}
		if err != nil {
			x.ignore(subject, err)
			return
		}
		x.applyRouteEvent(ev)
		return
	}
	ev, err := decodeEvent(data)
	switch {
	case err != nil:
	case ev.JobID != job || ev.Route != route:
		err = fmt.Errorf("job %q of route %q on the subject of job %q of route %q", ev.JobID, ev.Route, job, route)
	case ev.Seq == 0 && ev.Type != events.EventRejected:
		err = errors.New("a job's event without a seq")
	}
	if err != nil {
		x.ignore(subject, err)
		return
	}
	if e, changed := x.applyEvent(ev, seq); changed {
		x.broadcast(e)
	}
}

// ignore counts a message that is not an event.
func (x *Index) ignore(subject string, err error) {
	x.garbage.Add(1)
	x.log.Debug().Err(err).Str(logkey.Subject, subject).Msg("ignored a message on the events subjects that is not an event")
}
