package route

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/events"
)

// PauseOperator is the kind of a pause an operator asked for.
const PauseOperator = "operator"

// OperatorRecheck bounds how long a call waits on an operator's pause
// before it looks again: an operator may resume at any moment, and the
// checks and submissions held back return within this (spread) once one
// does, rather than at the pause's end.
const OperatorRecheck = 30 * time.Second

// Operator pause limits: who and why are shown in every console and log.
const (
	MaxPauseBy     = events.MaxOperatorLen
	MaxPauseReason = events.MaxReasonLen
)

// OperatorKey is where an operator's pause of route is kept in the routes
// bucket: apart from the provider's pauses of the route, which calls that
// succeed clear and rate limits extend.
func OperatorKey(route string) string { return "operator." + route }

// Operator returns the operator's pause of route, while one is in force.
// An operator's pause without an end (Until zero) holds until resumed.
func (p *Pauses) Operator(route string) (Pause, bool) {
	ps, ok := p.pause(OperatorKey(route))
	if !ok || (!ps.Until.IsZero() && !p.now().Before(ps.Until)) {
		return Pause{}, false
	}
	return ps, true
}

// operatorHold is how long a call on route waits on an operator's pause:
// until its end, at most OperatorRecheck, spread.
func (p *Pauses) operatorHold(route string) time.Duration {
	ps, ok := p.Operator(route)
	if !ok {
		return 0
	}
	d := OperatorRecheck
	if !ps.Until.IsZero() {
		d = min(d, ps.Until.Sub(p.now()))
	}
	return p.spread(d)
}

// PauseRoute stops every provider call of route across the fleet — creates,
// polls, cancels at the provider — until until (zero: until ResumeRoute),
// on behalf of by, for reason. Deadlines still pass: a job whose deadline
// comes while the route is paused expires. It replaces any earlier
// operator's pause of the route and returns the pause written.
func (p *Pauses) PauseRoute(ctx context.Context, route string, until time.Time, by, reason string) (Pause, error) {
	switch {
	case by == "":
		return Pause{}, errors.New("pause: who pauses must be named")
	case len(by) > MaxPauseBy || !utf8.ValidString(by):
		return Pause{}, fmt.Errorf("pause: who pauses must be valid UTF-8 of at most %d bytes", MaxPauseBy)
	case len(reason) > MaxPauseReason || !utf8.ValidString(reason):
		return Pause{}, fmt.Errorf("pause: the reason must be valid UTF-8 of at most %d bytes", MaxPauseReason)
	}
	now := p.now().UTC()
	if !until.IsZero() && !until.After(now) {
		return Pause{}, fmt.Errorf("pause: the end (%s) is not in the future", until.Format(time.RFC3339))
	}
	ps := Pause{Kind: PauseOperator, Until: until.UTC(), Reason: reason, By: by, Since: now}
	if e, err := p.kv.Get(ctx, OperatorKey(route)); err == nil {
		var cur Pause
		if json.Unmarshal(e.Value(), &cur) == nil && (cur.Until.IsZero() || now.Before(cur.Until)) {
			ps.Since = cur.Since // one episode, its end or reason changed
		}
	}
	b, err := json.Marshal(ps)
	if err != nil {
		return Pause{}, err
	}
	if _, err := p.kv.Put(ctx, OperatorKey(route), b); err != nil {
		return Pause{}, fmt.Errorf("pause route %s: %w", route, err)
	}
	p.change(func(m map[string]Pause) { m[OperatorKey(route)] = ps })
	return ps, nil
}

// ResumeRoute ends the operator's pause of route and returns it; false when
// there was none in force.
func (p *Pauses) ResumeRoute(ctx context.Context, route string) (Pause, bool, error) {
	e, err := p.kv.Get(ctx, OperatorKey(route))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return Pause{}, false, nil
	case err != nil:
		return Pause{}, false, fmt.Errorf("resume route %s: %w", route, err)
	}
	var ps Pause
	_ = json.Unmarshal(e.Value(), &ps) // unreadable: removed all the same
	if err := p.kv.Delete(ctx, OperatorKey(route)); err != nil {
		return Pause{}, false, fmt.Errorf("resume route %s: %w", route, err)
	}
	p.change(func(m map[string]Pause) { delete(m, OperatorKey(route)) })
	inForce := ps.Until.IsZero() || p.now().Before(ps.Until)
	return ps, inForce, nil
}

// Announce publishes an operator's pause or resume as the route's event
// (events.RouteEvent), after the pause itself is written: a failure leaves
// the pause in force and is the caller's to retry (pausing again is
// harmless).
func Announce(ctx context.Context, js jetstream.JetStream, ns events.Namespace, typ, route string, ps Pause) error {
	ev := events.RouteEvent{V: events.Version, Type: typ, Time: time.Now().UTC(), Route: route, By: ps.By, Reason: ps.Reason}
	if typ == events.EventRoutePaused {
		ev.Until = ps.Until
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if _, err := js.Publish(ctx, ns.RouteEvent(route), b); err != nil {
		return fmt.Errorf("record the %s event of route %s: %w", typ, route, err)
	}
	return nil
}
