package budget

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
)

// Level is one level of limits a route's calls belong to: the global
// level (everything Pollux calls), the route's account (shared by every
// route that names it), and the route itself. A call needs a lease at
// every level that limits its kind; a level that limits nothing costs
// nothing.
type Level struct {
	// Level is events.LevelGlobal, LevelAccount or LevelRoute; Name is the
	// account's or route's name ("" for the global level).
	Level, Name string
	// Submit and Status limit the level's submit and status calls.
	Submit, Status Limit
	// Running caps the level's jobs created at the provider and not yet
	// ended (0: no cap).
	Running int
	// Learn learns the running cap from the provider's refusals (see
	// Running.Refused), from Running or, unset, from Uncapped.
	Learn bool
}

// Scope is the level's subject token (events.Scope).
func (l Level) Scope() string { return events.Scope(l.Level, l.Name) }

// String names the level for logs and metrics: "global", "account x",
// "route y".
func (l Level) String() string {
	if l.Level == events.LevelGlobal {
		return events.LevelGlobal
	}
	return l.Level + " " + l.Name
}

// Limit is the level's limit on calls of kind (events.SlotSubmit or
// events.SlotStatus).
func (l Level) Limit(kind string) Limit {
	if kind == events.SlotSubmit {
		return l.Submit
	}
	return l.Status
}

// Pool is one process's budgets: one *Budget per scope and kind, and one
// *Running per scope, shared by every route of the process that belongs
// to the scope (two routes of one account share its leases, and the
// leases one of them keeps for reuse serve the other).
type Pool struct {
	// Log, when set, gets a line for each change of a learned rate this
	// process makes.
	Log zerolog.Logger

	js    jetstream.JetStream
	ns    events.Namespace
	slots jetstream.Stream
	o     events.Options

	mu      sync.Mutex
	budgets map[string]*Budget
	running map[string]*Running
}

// NewPool returns an empty pool over the namespace's slots stream.
func NewPool(js jetstream.JetStream, ns events.Namespace, slots jetstream.Stream, o events.Options) *Pool {
	return &Pool{js: js, ns: ns, slots: slots, o: o, budgets: map[string]*Budget{}, running: map[string]*Running{}}
}

// Calls sets up the budgets of kind at every level that limits it and
// returns them as a chain, narrowest level first.
func (p *Pool) Calls(ctx context.Context, levels []Level, kind string) (Chain, error) {
	var c Chain
	for i := len(levels) - 1; i >= 0; i-- {
		l := levels[i]
		if l.Limit(kind).IsZero() {
			continue
		}
		key := l.Scope() + "/" + kind
		p.mu.Lock()
		b, ok := p.budgets[key]
		p.mu.Unlock()
		if !ok {
			var err error
			if b, err = ensure(ctx, p.js, p.ns, p.slots, l.Scope(), kind, l.Limit(kind), p.o, l.String(), p.Log); err != nil {
				return nil, fmt.Errorf("%s: %w", l, err)
			}
			p.mu.Lock()
			if have, ok := p.budgets[key]; ok {
				b.Close() // another route set it up meanwhile
				b = have
			} else {
				p.budgets[key] = b
			}
			p.mu.Unlock()
		}
		c = append(c, b)
	}
	return c, nil
}

// Running sets up the running slots of every level that caps them and
// returns them, narrowest level first.
func (p *Pool) Running(ctx context.Context, levels []Level) (Slots, error) {
	var s Slots
	for i := len(levels) - 1; i >= 0; i-- {
		l := levels[i]
		if l.Running <= 0 && !l.Learn {
			continue
		}
		p.mu.Lock()
		r, ok := p.running[l.Scope()]
		p.mu.Unlock()
		if !ok {
			var err error
			if r, err = EnsureRunning(ctx, p.js, p.ns, l, p.o); err != nil {
				return nil, err
			}
			p.mu.Lock()
			if have, ok := p.running[l.Scope()]; ok {
				r = have
			} else {
				p.running[l.Scope()] = r
			}
			p.mu.Unlock()
		}
		s = append(s, r)
	}
	return s, nil
}

// Close returns the process's idle leases to the fleet.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range p.budgets {
		b.Close()
	}
}

// Chain is the budgets a call needs a lease of, narrowest level first. A
// nil chain limits nothing.
type Chain []*Budget

// Acquire takes a lease at every level, or none: when one level has no
// lease free within the wait, the leases taken go back unused and ErrBusy
// (or ctx's error) is returned. The whole chain waits at most DefaultWait.
// Narrowest first: a lease of the scarce shared levels is not held while
// a route's own budget is awaited.
func (c Chain) Acquire(ctx context.Context) (Leases, error) {
	if len(c) == 0 {
		return nil, nil
	}
	if len(c) > 1 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWait)
		defer cancel()
	}
	ls := make(Leases, 0, len(c))
	for _, b := range c {
		l, err := b.Acquire(ctx)
		if err != nil {
			ls.Unused()
			if errors.Is(err, context.DeadlineExceeded) && len(c) > 1 {
				err = ErrBusy
			}
			return nil, fmt.Errorf("%s budget of %s: %w", b.kind, b.level, err)
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// Leases are the leases of one call, one per level.
type Leases []*Lease

// Release returns every lease after the call.
func (ls Leases) Release() {
	for _, l := range ls {
		l.Release()
	}
}

// Answered returns every lease after a call that answered err. A refusal
// of calls (Refusal) lowers the rate of the levels that learn theirs
// (Lease.Refused).
func (ls Leases) Answered(err error) {
	refused, concurrency := Refusal(err)
	for _, l := range ls {
		if refused && !concurrency {
			l.Refused()
		} else {
			l.Release()
		}
	}
}

// Refusal reports whether err is a refusal Pollux learns from: a rate
// limit that names no Retry-After (one that names it is obeyed as a route
// pause, and teaches nothing more), and whether the provider said it is
// about jobs running at once (provider.Error.Concurrency) rather than
// calls.
func Refusal(err error) (refused, concurrency bool) {
	if provider.ClassOf(err) != provider.RateLimited || provider.RetryAfterOf(err) > 0 {
		return false, false
	}
	return true, provider.ConcurrencyLimited(err)
}

// Learns reports whether any level of the call learns its rate.
func (ls Leases) Learns() bool {
	return slices.ContainsFunc(ls, func(l *Lease) bool { return l != nil && l.b.learner != nil })
}

// Unused returns every lease of a call that was not made.
func (ls Leases) Unused() {
	for _, l := range ls {
		l.Unused()
	}
}

// RepairInterval is how often running slots are reconciled with the job
// records (see Running.Repair).
const RepairInterval = 30 * time.Second
