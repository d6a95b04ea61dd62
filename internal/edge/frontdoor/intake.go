package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/events"
)

// Submissions through an outage. A create the front door answers 503
// must make nothing, ever, and one it answers 2xx must be stored exactly
// once — whatever NATS does meanwhile. So a submission (and a track
// request) is published by deliver:
//
//   - with Nats-Msg-Id events.IntakeMsgID, so a copy sent again within
//     the intake stream's duplicate window is dropped;
//   - never into a reconnect buffer: it is sent only while the connection
//     is up (Config.Intake is a connection without one, so one that drops
//     between the look and the write refuses it), and while it is down the
//     request waits for it, at most ConnectWait, then is answered 503 with
//     nothing sent;
//   - sent, and unanswered (a timeout, a disconnect mid-flight), it is in
//     doubt: the request is held and the same message sent again whenever
//     the connection is up, until an ack — stored, or a duplicate's: it
//     is stored once — for at most DoubtWait, well inside the duplicate
//     window;
//   - only when DoubtWait passes still in doubt is it answered 503, and
//     settled once NATS answers (settle.go): its job's record is created
//     ended before ingest takes a copy, or, when ingest took one first, its
//     cancel requested. That case is rare, logged loudly and counted.

// intake publishes the front door's intake messages.
type intake struct {
	js          jetstream.JetStream
	connectWait time.Duration
	doubtWait   time.Duration
	// try bounds one publish's wait for its ack (Config.RequestTimeout).
	try time.Duration
	// write is the HTTP server's WriteTimeout, which a held request's
	// write deadline is pushed back by.
	write time.Duration
	// settles are the settlements under way (settle.go), which end when
	// stop is canceled.
	settles sync.WaitGroup
	stop    context.Context
	cancel  context.CancelFunc
}

// newIntake checks cfg's intake settings against the intake stream.
func newIntake(cfg Config, js jetstream.JetStream, res *events.Resources) (*intake, error) {
	in := &intake{js: js, connectWait: cfg.ConnectWait, doubtWait: cfg.DoubtWait, try: cfg.RequestTimeout, write: cfg.WriteTimeout}
	if cfg.Intake != nil {
		if nc := cfg.Intake.Conn(); nc != nil && nc.Opts.ReconnectBufSize >= 0 {
			return nil, errors.New("frontdoor: Intake: its connection keeps a reconnect buffer, which would send a submission after its request was answered: connect it with nats.ReconnectBufSize(-1)")
		}
		in.js = cfg.Intake
	}
	window := events.IntakeDuplicates
	if res != nil && res.Intake != nil {
		if d := res.Intake.CachedInfo().Config.Duplicates; d > 0 {
			window = d
		}
	}
	if 2*cfg.DoubtWait > window {
		return nil, fmt.Errorf("frontdoor: DoubtWait %s: at most half the intake stream's duplicate window (%s)", cfg.DoubtWait, window)
	}
	in.stop, in.cancel = context.WithCancel(context.Background())
	return in, nil
}

// notStored is a publish that stored nothing, and never will: nothing
// was sent, or the stream refused it.
type notStored struct{ err error }

func (e *notStored) Error() string { return "not stored: " + e.err.Error() }
func (e *notStored) Unwrap() error { return e.err }

// unconfirmed is a publish sent whose storing no ack confirmed within
// DoubtWait: the message may be stored, or be later.
type unconfirmed struct{ err error }

func (e *unconfirmed) Error() string { return "not confirmed: " + e.err.Error() }
func (e *unconfirmed) Unwrap() error { return e.err }

// retryPause is the pause between two tries that found NATS not taking
// messages (no stream answered, the connection dropped at the write).
const retryPause = 100 * time.Millisecond

// deliver publishes msg (its Nats-Msg-Id set) so that it is stored once
// or not at all: nil once an ack says it is stored; a *notStored when
// nothing was or will be; an *unconfirmed when DoubtWait passed with its
// outcome unknown. The request's end before anything was sent ends it
// (*notStored); once something was, it is settled all the same.
func (in *intake) deliver(ctx context.Context, msg *nats.Msg) error {
	nc := in.js.Conn()
	holdWrites(ctx, time.Now().Add(in.connectWait+in.try+in.doubtWait+in.write))
	connectBy := time.Now().Add(in.connectWait)
	var doubtBy time.Time // set once a try may have stored msg
	var last error
	for {
		until := connectBy
		if !doubtBy.IsZero() {
			until = doubtBy
		}
		if err := waitConnected(ctx, nc, until); err != nil {
			if doubtBy.IsZero() {
				return &notStored{cmpErr(last, err)}
			}
			return &unconfirmed{cmpErr(last, err)}
		}
		if err := ctx.Err(); err != nil && doubtBy.IsZero() {
			return &notStored{err}
		}
		try := time.Now()
		deadline := try.Add(in.try)
		if !doubtBy.IsZero() && doubtBy.Before(deadline) {
			// The last try still waits a moment for its ack.
			deadline = doubtBy
			if least := try.Add(time.Second); deadline.Before(least) {
				deadline = least
			}
		}
		tctx, cancel := context.WithDeadline(ctx, deadline)
		_, err := in.js.PublishMsg(tctx, msg)
		cancel()
		if err == nil {
			return nil
		}
		last = err
		switch {
		case notSent(err):
		case refused(err) && doubtBy.IsZero():
			return &notStored{err}
		case refused(err):
		default: // sent, and unanswered: it may be stored
			if doubtBy.IsZero() {
				doubtBy = try.Add(in.doubtWait)
				ctx = context.WithoutCancel(ctx) // the app gone, it is settled all the same
			}
		}
		if !doubtBy.IsZero() && !time.Now().Before(doubtBy) {
			return &unconfirmed{err}
		}
		if doubtBy.IsZero() && !time.Now().Before(connectBy) {
			return &notStored{err}
		}
		select {
		case <-ctx.Done():
			return &notStored{ctx.Err()}
		case <-time.After(retryPause):
		}
	}
}

// notSent reports whether a failed publish sent nothing the stream could
// store: the client refused it (its connection down, closed or
// draining, it too large), or no stream listened on its subject.
func notSent(err error) bool {
	for _, e := range []error{nats.ErrReconnectBufExceeded, nats.ErrConnectionDraining, nats.ErrMaxPayload,
		nats.ErrBadSubject, nats.ErrHeadersNotSupported, nats.ErrInvalidConnection, jetstream.ErrNoStreamResponse} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// refused reports whether the stream answered a publish with an error:
// it stored nothing (a full intake, say).
func refused(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api)
}

// waitConnected waits until nc is connected, until deadline or ctx ends:
// nil once it is. A closed connection never will be.
func waitConnected(ctx context.Context, nc *nats.Conn, deadline time.Time) error {
	if nc == nil {
		return nil
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		switch {
		case nc.IsConnected():
			return nil
		case nc.IsClosed():
			return nats.ErrConnectionClosed
		case ctx.Err() != nil:
			return ctx.Err()
		case !time.Now().Before(deadline):
			return errNotConnected
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

func cmpErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// writerKey keys the request's http.ResponseController in its context.
type writerKey struct{}

// withWriter gives h's requests their ResponseController (holdWrites).
func withWriter(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), writerKey{}, http.NewResponseController(w))))
	})
}

// holdWrites pushes the write deadline of ctx's request back to until: a
// submission held through an outage is still answered.
func holdWrites(ctx context.Context, until time.Time) {
	if rc, ok := ctx.Value(writerKey{}).(*http.ResponseController); ok {
		_ = rc.SetWriteDeadline(until)
	}
}
