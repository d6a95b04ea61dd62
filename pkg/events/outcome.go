package events

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Outcome is a message handler's verdict, settled on the message in one
// place (Settle) instead of scattered Ack/Nak calls.
type Outcome struct {
	kind  outcomeKind
	delay time.Duration
}

type outcomeKind uint8

const (
	outcomeDone outcomeKind = iota
	outcomeLater
	outcomeStop
)

// Done is the outcome of a message that did its job: remove it (Ack).
func Done() Outcome { return Outcome{kind: outcomeDone} }

// Later is the outcome of a message to deliver again after d
// (NakWithDelay). A check message comes back this way at its next poll
// time.
func Later(d time.Duration) Outcome {
	return Outcome{kind: outcomeLater, delay: max(d, 0)}
}

// Stop is the outcome of a message never to deliver again (Term): a
// terminal job's check, or an intake message that was rejected.
func Stop() Outcome { return Outcome{kind: outcomeStop} }

// Delay returns the redelivery delay of a Later outcome.
func (o Outcome) Delay() time.Duration { return o.delay }

// IsLater reports whether o asks for redelivery.
func (o Outcome) IsLater() bool { return o.kind == outcomeLater }

// IsStop reports whether o ends the message.
func (o Outcome) IsStop() bool { return o.kind == outcomeStop }

func (o Outcome) String() string {
	switch o.kind {
	case outcomeLater:
		return "later " + o.delay.String()
	case outcomeStop:
		return "stop"
	}
	return "done"
}

// Settle acknowledges msg according to the outcome.
func (o Outcome) Settle(msg jetstream.Msg) error {
	switch o.kind {
	case outcomeLater:
		return msg.NakWithDelay(o.delay)
	case outcomeStop:
		return msg.Term()
	}
	return msg.Ack()
}
