package jobs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/pollux-dev/pollux/internal/platform/tracing"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/state"
)

// A job's events go out through its record's outbox. A write appends the
// events it causes to the outbox, and its writer publishes them after the
// write (each with Nats-Msg-Id job:seq, so a second publication is dropped
// by the stream). Nobody writes again just to empty the outbox: the next
// write empties it, after making sure its events are in the events stream
// — known published (a check carries the seq its writer published up to),
// or found there (the job's latest event is one message get), or published
// then. A terminal job keeps its last events in the record, and whoever
// ends its check — the poller's delivery that finds it ended, an outsider
// that finds it ended already — republishes them first: the writer that
// ended it may have died before it published them.

// publish publishes j's outbox events and returns the seq up to which they
// are out.
func (o *Owner) publish(ctx context.Context, j *state.Job) (_ uint64, err error) {
	if len(j.Outbox) == 0 {
		return 0, nil
	}
	subject := o.ns.Event(j.Route, j.ID)
	acks := make([]jetstream.PubAckFuture, 0, len(j.Outbox))
	// With tracing on, each event has a span, whose context its message
	// carries in a header: a subscriber continues the job's trace.
	var spans []trace.Span
	acked := 0
	defer func() {
		for _, s := range spans[min(acked, len(spans)):] {
			tracing.End(s, err) // not acknowledged: the failure, or a stop
		}
	}()
	for _, p := range j.Outbox {
		b, err := events.NewEvent(j, p).Encode()
		if err != nil {
			return 0, fmt.Errorf("encode event %d of job %s: %w", p.Seq, j.ID, err)
		}
		msg := &nats.Msg{Subject: subject, Data: b, Header: nats.Header{}}
		if o.tracer != nil {
			sctx, span := o.eventSpan(ctx, j, p, subject)
			o.tracer.Inject(sctx, msg.Header)
			spans = append(spans, span)
		}
		// Asynchronous, in order on one connection: one round trip for
		// all of them.
		f, err := o.js.PublishMsgAsync(msg, jetstream.WithMsgID(events.MsgID(j.ID, p.Seq)))
		if err != nil {
			return 0, fmt.Errorf("publish %s event of job %s: %w", p.Type, j.ID, err)
		}
		acks = append(acks, f)
	}
	// A publish the server never acknowledges (the connection dropped
	// under it) would be waited for forever.
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	var last uint64
	for i, f := range acks {
		select {
		case <-f.Ok():
			if spans != nil {
				tracing.End(spans[i], nil)
			}
			acked = i + 1
		case err := <-f.Err():
			return last, fmt.Errorf("publish %s event of job %s: %w", j.Outbox[i].Type, j.ID, err)
		case <-ctx.Done():
			return last, fmt.Errorf("publish events of job %s: %w", j.ID, ctx.Err())
		}
		last = j.Outbox[i].Seq
		if o.hooks.Published != nil {
			o.hooks.Published(j.Route, j.Outbox[i].Type)
		}
	}
	return last, nil
}

// publishTimeout bounds the wait for an event's acknowledgement.
const publishTimeout = 10 * time.Second

// settleOutbox makes sure the events in j's outbox are in the events
// stream — those up to known are — and removes them from the outbox. It
// runs on the copy a write is about to change, so the write empties the
// outbox for free.
func (o *Owner) settleOutbox(ctx context.Context, j *state.Job, known uint64) error {
	j.Published(known)
	if len(j.Outbox) == 0 {
		return nil
	}
	if err := o.republish(ctx, j); err != nil {
		return err
	}
	j.Outbox = nil
	return nil
}

// republish publishes those of j's outbox events the events stream does
// not have (the writer died before publishing them), except events older
// than the stream keeps: those it dropped, and publishing them now would
// repeat them.
func (o *Owner) republish(ctx context.Context, j *state.Job) error {
	last, err := o.lastEvent(ctx, j.Route, j.ID)
	if err != nil {
		return err
	}
	missing := *j
	missing.Outbox = nil
	horizon := o.now().Add(-o.maxAge)
	for _, p := range j.Outbox {
		if p.Seq > last && p.At.After(horizon) {
			missing.Outbox = append(missing.Outbox, p)
		}
	}
	if len(missing.Outbox) == 0 {
		return nil
	}
	o.log.Info().Str(logkey.JobID, j.ID).Int(logkey.Events, len(missing.Outbox)).Msg("publishing events a writer left unpublished")
	_, err = o.publish(ctx, &missing)
	return err
}

// lastEvent returns the seq of the job's latest event in the events
// stream (0: none).
func (o *Owner) lastEvent(ctx context.Context, route, id string) (uint64, error) {
	m, err := o.res.Events.GetLastMsgForSubject(ctx, o.ns.Event(route, id))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read the latest event of job %s: %w", id, err)
	}
	// Its message id is "job:seq" (events.MsgID).
	msgID := m.Header.Get(jetstream.MsgIDHeader)
	if i := strings.LastIndexByte(msgID, ':'); i >= 0 {
		if seq, err := strconv.ParseUint(msgID[i+1:], 10, 64); err == nil {
			return seq, nil
		}
	}
	ev, err := events.DecodeEvent(m.Data)
	if err != nil {
		return 0, fmt.Errorf("read the latest event of job %s: %w", id, err)
	}
	return ev.Seq, nil
}
