package route

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Op names a provider call.
type Op string

// The provider calls a gate makes.
const (
	// OpSubmit creates the job (under the submit budgets; its answer
	// teaches the running caps that learn).
	OpSubmit Op = "submit"
	// OpStatus polls the job (under the status budgets, as the others).
	OpStatus Op = "status"
	// OpCancel asks the provider to stop the job.
	OpCancel Op = "cancel"
	// OpFind looks up the job a submission in doubt may have created
	// (provider.Finder; see Route.CanFind).
	OpFind Op = "find"
)

// Call is one provider call to make through a Gate.
type Call struct {
	// Op is the call.
	Op Op
	// Request is what a submit or a find sends.
	Request provider.SubmitRequest
	// Ref names the job of a status or cancel call.
	Ref provider.Ref
	// Ready, when set, runs once the call is admitted — its leases held,
	// the route not paused — right before the call: it returns the
	// context to make the call in (a span's) and whether to make it. A
	// caller records what it is about to do here (a submit's attempt),
	// so that nothing is recorded for a call that was never admitted.
	// False: no call, the leases go back unused (Answer.Skipped).
	Ready func(ctx context.Context) (context.Context, bool)
	// Log, when set, receives the call's lines (default: the gate's).
	Log *zerolog.Logger
}

// Answer is what became of a call.
type Answer struct {
	// Called reports whether the provider was called.
	Called bool
	// Paused: the route is paused; Wait is until the pause ends.
	Paused bool
	// Busy: the budget had no lease free across the fleet at some level
	// (or ctx ended while one was awaited, Err says which); Wait is a
	// short, jittered wait (GateConfig.BusyWait).
	Busy bool
	// Skipped: Call.Ready declined the call.
	Skipped bool
	// Wait is how long to wait before calling again, when not called.
	Wait time.Duration
	// Status is the provider's answer (a find's when Found).
	Status provider.Status
	// Found is a find's answer: the provider has the job.
	Found bool
	// Err is the provider's error when called; the budget's when Busy.
	Err error
	// Pause is how long the route is paused after the answer (a rate
	// limit, refused credentials; Pauses.After), 0 when it is not.
	Pause time.Duration
}

// GateConfig configures a process's gates. Zero values mean the defaults
// on each field.
type GateConfig struct {
	// Submit sets up the submit budgets and the running slots (ingest);
	// without it a gate makes status, cancel and find calls only.
	Submit bool
	// CallTimeout bounds one call where the route sets none
	// (Route.CallTimeout; default 30s).
	CallTimeout time.Duration
	// BusyWait is the wait (jittered) after a call found no lease free
	// (default 500ms).
	BusyWait time.Duration
	// Observe, when set, observes each call made by route, op, result
	// class ("ok" or a provider error class) and duration. It must not
	// block.
	Observe func(route string, op Op, class string, d time.Duration)
	// Logger receives the gates' lines (default: none).
	Logger zerolog.Logger
	// Rand jitters the waits (default: a random seed).
	Rand *rand.Rand
}

// RepairInterval is how often running slots no job holds are looked for
// (Gates.Repair), and RepairGrace how old a slot no record names must be
// to be freed.
const (
	RepairInterval = budget.RepairInterval
	RepairGrace    = budget.RepairGrace
)

// Gates are one process's gates over one pool of budgets: a budget of a
// level that several routes share (an account's) is one budget, whose
// leases this process keeps for reuse serve each of them.
type Gates struct {
	cfg    GateConfig
	pool   *budget.Pool
	pauses *Pauses

	mu sync.Mutex
	m  map[string]*Gate
}

// NewGates returns a process's gates over the namespace's slots stream;
// Open opens each route's. Close returns the leases kept for reuse.
func NewGates(js jetstream.JetStream, ns events.Namespace, slots jetstream.Stream, o events.Options, pauses *Pauses, cfg GateConfig) *Gates {
	cfg.CallTimeout = cmp.Or(cfg.CallTimeout, 30*time.Second)
	cfg.BusyWait = cmp.Or(cfg.BusyWait, 500*time.Millisecond)
	if cfg.Rand == nil {
		cfg.Rand = schedule.NewRand(0)
	}
	pool := budget.NewPool(js, ns, slots, o)
	pool.Log = cfg.Logger
	return &Gates{cfg: cfg, pool: pool, pauses: pauses, m: map[string]*Gate{}}
}

// Open sets up route r's budgets at every level (once: a second Open
// returns the same gate) and returns its gate.
func (gs *Gates) Open(ctx context.Context, r *Route) (*Gate, error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g, ok := gs.m[r.Name]; ok {
		return g, nil
	}
	g := &Gate{Route: r, cfg: &gs.cfg, pauses: gs.pauses}
	var err error
	if g.status, err = gs.pool.Calls(ctx, r.Levels, events.SlotStatus); err != nil {
		return nil, fmt.Errorf("route %s: %w", r.Name, err)
	}
	if gs.cfg.Submit {
		if g.submit, err = gs.pool.Calls(ctx, r.Levels, events.SlotSubmit); err != nil {
			return nil, fmt.Errorf("route %s: %w", r.Name, err)
		}
		if g.running, err = gs.pool.Running(ctx, r.Levels); err != nil {
			return nil, fmt.Errorf("route %s: %w", r.Name, err)
		}
	}
	gs.m[r.Name] = g
	return g, nil
}

// Close returns the process's idle leases to the fleet.
func (gs *Gates) Close() { gs.pool.Close() }

// Repaired is what a repair of one level's running slots did.
type Repaired struct {
	// Level names the level ("account x").
	Level string
	// Freed is how many slots no job held it freed.
	Freed int
	// Err is the repair's error, if any.
	Err error
}

// Repair frees, at every level of the open gates that caps running jobs
// (each once), the slots no job holds (budget.Running.Repair): get reads
// a job, grace is how old a slot no record names must be.
func (gs *Gates) Repair(ctx context.Context, get func(context.Context, string) (*state.Job, error), now time.Time, grace time.Duration) []Repaired {
	var out []Repaired
	for _, r := range gs.levels() {
		n, err := r.Repair(ctx, get, now, grace)
		if n > 0 || err != nil {
			out = append(out, Repaired{Level: r.Level().String(), Freed: n, Err: err})
		}
	}
	return out
}

// Caps reports whether an open gate's level caps running jobs.
func (gs *Gates) Caps() bool { return len(gs.levels()) > 0 }

func (gs *Gates) levels() []*budget.Running {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	seen := map[string]bool{}
	var out []*budget.Running
	for _, g := range gs.m {
		for _, r := range g.running {
			if !seen[r.Level().Scope()] {
				seen[r.Level().Scope()] = true
				out = append(out, r)
			}
		}
	}
	return out
}

// Gate is a route's one way to its provider: every create, status, cancel
// and find call goes through Call, which holds it while the route is
// paused, takes a lease at every budget level, makes the call within the
// route's timeout, returns the leases with what the answer teaches, and
// pauses the route when the answer says so. It also holds the route's
// running slots (Take, Free), whose learned caps a create's answer moves.
type Gate struct {
	// Route is the route the gate calls.
	Route *Route

	cfg     *GateConfig
	pauses  *Pauses
	submit  budget.Chain
	status  budget.Chain
	running budget.Slots
}

// Timeout is the route's provider call timeout.
func (g *Gate) Timeout() time.Duration {
	return cmp.Or(g.Route.CallTimeout, g.cfg.CallTimeout)
}

// Hold is how long calls on the route wait now (Pauses.Hold), and why
// ("" when they do not).
func (g *Gate) Hold() (time.Duration, string) {
	d := g.pauses.Hold(g.Route)
	if d <= 0 {
		return 0, ""
	}
	return d, g.pauses.Why(g.Route)
}

// Call makes one provider call: not while the route is paused (before
// its leases are awaited, nor after), nor without a lease at every level
// (a submit's budgets for a submit, the status budgets for the others).
// It never blocks longer than the budget's wait and the route's timeout.
func (g *Gate) Call(ctx context.Context, c Call) Answer {
	r := g.Route
	if d := g.pauses.Hold(r); d > 0 {
		return Answer{Paused: true, Wait: d}
	}
	chain := g.status
	if c.Op == OpSubmit {
		chain = g.submit
	}
	leases, err := chain.Acquire(ctx)
	if err != nil {
		return Answer{Busy: true, Wait: schedule.Jitter(g.cfg.BusyWait, schedule.RetryJitter, g.cfg.Rand), Err: err}
	}
	if d := g.pauses.Hold(r); d > 0 {
		leases.Unused() // paused while the leases were awaited
		return Answer{Paused: true, Wait: d}
	}
	callCtx := ctx
	if c.Ready != nil {
		var ok bool
		if callCtx, ok = c.Ready(ctx); !ok {
			leases.Unused()
			return Answer{Skipped: true}
		}
	}
	var before []int
	if c.Op == OpSubmit {
		before = g.running.Before(ctx)
	}
	a := Answer{Called: true}
	cctx, cancel := context.WithTimeout(callCtx, g.Timeout())
	start := time.Now()
	a.Status, a.Found, a.Err = g.call(cctx, c)
	d := time.Since(start)
	cancel()
	leases.Answered(a.Err)
	if g.cfg.Observe != nil {
		class := "ok"
		if a.Err != nil {
			class = provider.ClassOf(a.Err).String()
		}
		g.cfg.Observe(r.Name, c.Op, class, d)
	}
	a.Pause = g.pauses.After(ctx, r, string(c.Op), a.Err)
	if c.Op == OpSubmit {
		log := cmp.Or(c.Log, &g.cfg.Logger)
		g.learn(ctx, a.Err, before, leases, *log)
	}
	return a
}

// call is the adapter's call: the one place in Pollux's services that
// calls a provider.
func (g *Gate) call(ctx context.Context, c Call) (st provider.Status, found bool, err error) {
	a := g.Route.Adapter
	switch c.Op {
	case OpSubmit:
		st, err = a.Submit(ctx, c.Request)
		return st, err == nil, err
	case OpStatus:
		st, err = a.Status(ctx, c.Ref)
		return st, err == nil, err
	case OpCancel:
		st, err = a.Cancel(ctx, c.Ref)
		return st, err == nil, err
	case OpFind:
		f, ok := a.(provider.Finder)
		if !ok {
			return st, false, fmt.Errorf("route %s: %w", g.Route.Name, errCannotFind)
		}
		return f.Find(ctx, c.Request)
	}
	return st, false, fmt.Errorf("route %s: unknown call %q", g.Route.Name, c.Op)
}

// errCannotFind is a find on a route whose adapter cannot find jobs.
var errCannotFind = errors.New("the provider cannot find jobs (see Route.CanFind)")

// CanFind reports whether the route's provider can look up a submission
// by what Pollux sent (provider.Finder): a create in doubt is resolved by
// asking it.
func (r *Route) CanFind() bool {
	_, ok := r.Adapter.(provider.Finder)
	return ok
}

// Take takes job's running slot at every level that caps running jobs
// and at which it holds none by have (its record's slots), and returns
// the slots it holds then; full names the level that is full ("account
// x"; "" when none is), and the job waits: it took nothing.
func (g *Gate) Take(ctx context.Context, job string, have []state.Slot) (held []state.Slot, full string, err error) {
	held, lvl, err := g.running.Take(ctx, job, have)
	if lvl != nil {
		full = lvl.Level().String()
	}
	return held, full, err
}

// Free frees job's running slots at the levels it holds none at by keep.
func (g *Gate) Free(ctx context.Context, job string, keep []state.Slot) error {
	return g.running.Free(ctx, job, keep)
}

// learn hands a create's answer to the running caps that learn. A
// refusal (budget.Refusal) the provider says is about jobs running at
// once lowers them (budget.Running.Refused), as does any other where no
// call rate learns (those that do came down as the leases were answered:
// budget.Leases.Answered); creates accepted in a row raise a learned
// running cap slowly (Accepted). before is the slots each level had
// taken before the call (budget.Slots.Before).
func (g *Gate) learn(ctx context.Context, callErr error, before []int, leases budget.Leases, log zerolog.Logger) {
	refused, concurrency := budget.Refusal(callErr)
	refused = refused && (concurrency || !leases.Learns())
	if callErr != nil && !refused {
		return
	}
	for i, lvl := range g.running {
		if !lvl.Level().Learn {
			continue
		}
		var limit int
		var changed bool
		var err error
		if refused {
			limit, changed, err = lvl.Refused(ctx, before[i])
		} else {
			limit, changed, err = lvl.Accepted(ctx)
		}
		switch {
		case err != nil:
			log.Warn().Err(err).Str("level", lvl.Level().String()).Msg("learning the running cap failed")
		case changed && refused:
			log.Warn().Str("level", lvl.Level().String()).Int("running_cap", limit).
				Msg("the provider refused a create at this many running: learned running cap lowered")
		case changed:
			log.Info().Str("level", lvl.Level().String()).Int("running_cap", limit).Msg("learned running cap raised after creates accepted at the cap")
		}
	}
}
