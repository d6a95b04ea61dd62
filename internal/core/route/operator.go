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

// SetRecheck sets how long a call waits on an operator's pause before it
// looks again (default OperatorRecheck): tests that resume a route do not
// wait half a minute for what it held back.
func (p *Pauses) SetRecheck(d time.Duration) { p.recheck.Store(int64(d)) }

// operatorHold is how long a call on route waits on an operator's pause:
// until its end, at most OperatorRecheck, spread.
func (p *Pauses) operatorHold(route string) time.Duration {
	ps, ok := p.Operator(route)
	if !ok {
		return 0
	}
	d := OperatorRecheck
	if r := time.Duration(p.recheck.Load()); r > 0 {
		d = r
	}
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
	if err := checkOperator("pause", by, reason); err != nil {
		return Pause{}, err
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

// checkOperator checks who acts and why, for action ("pause", "resume").
func checkOperator(action, by, reason string) error {
	switch {
	case by == "":
		return fmt.Errorf("%s: who acts must be named", action)
	case len(by) > MaxPauseBy || !utf8.ValidString(by):
		return fmt.Errorf("%s: who acts must be valid UTF-8 of at most %d bytes", action, MaxPauseBy)
	case len(reason) > MaxPauseReason || !utf8.ValidString(reason):
		return fmt.Errorf("%s: the reason must be valid UTF-8 of at most %d bytes", action, MaxPauseReason)
	}
	return nil
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

// PauseAndRecord is what an operator's pause is, wherever it is asked
// for: PauseRoute, then the route's route_paused event. The event is
// published after the pause is written; a failure leaves the pause in
// force and is the caller's to retry (pausing again is harmless).
func PauseAndRecord(ctx context.Context, p *Pauses, js jetstream.JetStream, ns events.Namespace, route string, until time.Time, by, reason string) (Pause, error) {
	ps, err := p.PauseRoute(ctx, route, until, by, reason)
	if err != nil {
		return Pause{}, err
	}
	return ps, Announce(ctx, js, ns, events.RouteEvent{Type: events.EventRoutePaused, Route: route, By: by, Reason: reason, Until: ps.Until})
}

// ResumeAndRecord is what an operator's resume is: ResumeRoute, then, when
// a pause was in force, the route's route_resumed event naming by and
// reason. It returns the pause that ended.
func ResumeAndRecord(ctx context.Context, p *Pauses, js jetstream.JetStream, ns events.Namespace, route, by, reason string) (Pause, bool, error) {
	if err := checkOperator("resume", by, reason); err != nil {
		return Pause{}, false, err
	}
	was, inForce, err := p.ResumeRoute(ctx, route)
	if err != nil || !inForce {
		return was, inForce, err
	}
	return was, true, Announce(ctx, js, ns, events.RouteEvent{Type: events.EventRouteResumed, Route: route, By: by, Reason: reason})
}

// Announce publishes ev as its route's event, stamped with the contract
// version and the time.
func Announce(ctx context.Context, js jetstream.JetStream, ns events.Namespace, ev events.RouteEvent, opts ...jetstream.PublishOpt) error {
	ev.V, ev.Time = events.Version, time.Now().UTC()
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if _, err := js.Publish(ctx, ns.RouteEvent(ev.Route), b, opts...); err != nil {
		return fmt.Errorf("record the %s event of route %s: %w", ev.Type, ev.Route, err)
	}
	return nil
}

// Why says why calls on route r wait while Hold is positive, as a waiting
// job's record names it (state.Job.WaitingFor): "route paused by <who>:
// <reason>" for an operator's pause, "route paused: <kind>" for the
// provider's (rate_limit, auth), "account <name> paused: rate_limit" for
// its account's; "" when nothing holds it.
func (p *Pauses) Why(r *Route) string {
	if ps, ok := p.Operator(r.Name); ok {
		why := "route paused by " + ps.By
		if ps.Reason != "" {
			why += ": " + ps.Reason
		}
		return why
	}
	if ps, ok := p.Active(r.Name); ok {
		return "route paused: " + ps.Kind
	}
	if k := r.PauseKey(); k != r.Name {
		if ps, ok := p.Active(k); ok {
			return "account " + r.Account + " paused: " + ps.Kind
		}
	}
	return ""
}
