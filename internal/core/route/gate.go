package route

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/platform/tracing"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
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
	// Job, when set, is the job the call is about: its span is in the
	// job's trace and names it.
	Job *state.Job
	// Ready, when set, runs once the call is admitted — its leases held,
	// the route not paused — right before the call. A caller records what
	// it is about to do here (a submit's attempt), so that nothing is
	// recorded for a call that was never admitted, and returns the job as
	// recorded (it replaces Job; nil keeps Job). An error declines the
	// call: no call, the leases go back unused, and Call returns the
	// error wrapped with ErrDeclined.
	Ready func(ctx context.Context) (*state.Job, error)
	// Log, when set, receives the call's lines (default: the gate's).
	Log *zerolog.Logger
}

// Held says why a call was not made.
type Held string

// Why a gate holds a call.
const (
	// HeldPaused: the route (its account, an operator) is paused.
	HeldPaused Held = "paused"
	// HeldBusy: the budget had no lease free across the fleet at some
	// level (or ctx ended while one was awaited).
	HeldBusy Held = "budget_busy"
)

// HeldError is a call the gate held back: it was not made, and may be
// made after Wait. Callers find it with errors.As.
type HeldError struct {
	// Why is why it was held.
	Why Held
	// Wait is how long to wait before calling again: until the pause
	// ends, or a short, jittered wait for a lease (GateConfig.BusyWait).
	Wait time.Duration
	// Err is why no lease came, when busy.
	Err error
}

func (e *HeldError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("call held (%s) for %s: %v", e.Why, e.Wait, e.Err)
	}
	return fmt.Sprintf("call held (%s) for %s", e.Why, e.Wait)
}

func (e *HeldError) Unwrap() error { return e.Err }

// Errors of a call that the provider did not answer with an error.
var (
	// ErrDeclined wraps the error with which Call.Ready declined a call.
	ErrDeclined = errors.New("call declined")
	// ErrNoSuchJob is a find's answer: the provider has no job from the
	// request.
	ErrNoSuchJob = errors.New("the provider has no job from the request")
)

// GateConfig configures a process's gates. Zero values mean the defaults
// on each field.
type GateConfig struct {
	// CallTimeout bounds one call where the route sets none
	// (Route.CallTimeout; default: 30s for a submit or a find, 20s for a
	// status or a cancel).
	CallTimeout time.Duration
	// BusyWait is the wait (jittered) after a call found no lease free
	// (default: 250ms for a status call, 500ms for the others).
	BusyWait time.Duration
	// Observe, when set, observes each call made by route, op, result
	// class ("ok" or a provider error class) and duration, and each call
	// held for want of a lease (class "budget_busy", duration 0). It must
	// not block.
	Observe func(route string, op Op, class string, d time.Duration)
	// Tracer, when set, makes each call a span (see trace.go).
	Tracer *tracing.Tracer
	// Logger receives the gates' lines (default: none).
	Logger zerolog.Logger
	// Rand jitters the waits (default: a random seed).
	Rand *rand.Rand
	// Apps are the apps' caps on their jobs (nil: none): an app's running
	// cap is a level of each of its jobs' running slots (Gate.Take).
	Apps *budget.Apps
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

// NewGates returns a process's gates over the namespace's slots stream,
// which hold calls while pauses say so; Open opens each route's. A
// process has one (package app builds it), whichever services it runs:
// a budget is one pool of leases in the process. Close returns the
// leases kept for reuse.
func NewGates(js jetstream.JetStream, ns events.Namespace, slots jetstream.Stream, o events.Options, pauses *Pauses, cfg GateConfig) *Gates {
	if cfg.Rand == nil {
		cfg.Rand = schedule.NewRand(0)
	}
	pool := budget.NewPool(js, ns, slots, o)
	pool.Log = cfg.Logger
	return &Gates{cfg: cfg, pool: pool, pauses: pauses, m: map[string]*Gate{}}
}

// Pauses are the route pauses the gates hold calls by.
func (gs *Gates) Pauses() *Pauses { return gs.pauses }

// Open sets up route r's status budgets at every level (once: a second
// Open returns the same gate) and returns its gate, which makes status,
// cancel and find calls.
func (gs *Gates) Open(ctx context.Context, r *Route) (*Gate, error) {
	return gs.open(ctx, r, false)
}

// OpenSubmit is Open with the route's submit budgets and running slots
// set up too: its gate also makes creates (ingest's).
func (gs *Gates) OpenSubmit(ctx context.Context, r *Route) (*Gate, error) {
	return gs.open(ctx, r, true)
}

func (gs *Gates) open(ctx context.Context, r *Route, submit bool) (*Gate, error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, ok := gs.m[r.Name]
	if !ok {
		g = &Gate{Route: r, cfg: &gs.cfg, pauses: gs.pauses}
		var err error
		if g.status, err = gs.pool.Calls(ctx, r.Levels, events.SlotStatus); err != nil {
			return nil, fmt.Errorf("route %s: %w", r.Name, err)
		}
		gs.m[r.Name] = g
	}
	if submit && !g.submits {
		var err error
		if g.submit, err = gs.pool.Calls(ctx, r.Levels, events.SlotSubmit); err != nil {
			return nil, fmt.Errorf("route %s: %w", r.Name, err)
		}
		if g.running, err = gs.pool.Running(ctx, r.Levels); err != nil {
			return nil, fmt.Errorf("route %s: %w", r.Name, err)
		}
		g.submits = true
	}
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
// (each once) and at every app's levels (budget.Apps), the slots no job
// holds (budget.Running.Repair): get reads
// a job, grace is how old a slot no record names must be.
func (gs *Gates) Repair(ctx context.Context, get func(context.Context, string) (*state.Job, error), now time.Time, grace time.Duration) []Repaired {
	var out []Repaired
	apps, err := gs.cfg.Apps.Levels(ctx)
	if err != nil {
		out = append(out, Repaired{Level: "apps", Err: err})
	}
	for _, r := range slices.Concat(apps, gs.levels()) {
		n, err := r.Repair(ctx, get, now, grace)
		if n > 0 || err != nil {
			out = append(out, Repaired{Level: r.Level().String(), Freed: n, Err: err})
		}
	}
	return out
}

// Caps reports whether an open gate's level caps running jobs, or an app
// caps its jobs: their slots need repairs.
func (gs *Gates) Caps() bool { return len(gs.levels()) > 0 || gs.cfg.Apps != nil }

// AppsCapRunning reports whether an app caps its running jobs: every
// route then needs an admission queue, where a job whose app is full
// waits.
func (gs *Gates) AppsCapRunning() bool { return gs.cfg.Apps.CapsRunning() }

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
	submits bool // the submit budgets and running slots are set up (OpenSubmit)
	submit  budget.Chain
	status  budget.Chain
	running budget.Slots
}

// Timeout is the route's timeout of a call op.
func (g *Gate) Timeout(op Op) time.Duration {
	def := 20 * time.Second
	if op == OpSubmit || op == OpFind {
		def = 30 * time.Second
	}
	return cmp.Or(g.Route.CallTimeout, g.cfg.CallTimeout, def)
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
// It returns the provider's answer (a find's: ErrNoSuchJob when the
// provider has no such job), or a *HeldError when the call was not made
// (paused, budget busy), or Ready's error wrapped with ErrDeclined.
func (g *Gate) Call(ctx context.Context, c Call) (provider.Status, error) {
	r := g.Route
	if d := g.pauses.Hold(r); d > 0 {
		return provider.Status{}, &HeldError{Why: HeldPaused, Wait: d}
	}
	chain := g.status
	if c.Op == OpSubmit {
		chain = g.submit
	}
	leases, err := chain.Acquire(ctx)
	if err != nil {
		g.observe(c.Op, string(HeldBusy), 0)
		return provider.Status{}, &HeldError{Why: HeldBusy, Wait: g.busyWait(c.Op), Err: err}
	}
	if d := g.pauses.Hold(r); d > 0 {
		leases.Unused() // paused while the leases were awaited
		return provider.Status{}, &HeldError{Why: HeldPaused, Wait: d}
	}
	if c.Ready != nil {
		j, err := c.Ready(ctx)
		if err != nil {
			leases.Unused()
			return provider.Status{}, fmt.Errorf("%w: %w", ErrDeclined, err)
		}
		c.Job = cmp.Or(j, c.Job)
	}
	var before []int
	if c.Op == OpSubmit {
		before = g.running.Before(ctx)
	}
	sctx, span := g.span(ctx, c)
	cctx, cancel := context.WithTimeout(sctx, g.Timeout(c.Op))
	start := time.Now()
	st, callErr := g.call(cctx, c)
	d := time.Since(start)
	cancel()
	endSpan(span, st, answered(callErr))
	if errors.Is(callErr, ErrNoSuchJob) {
		leases.Answered(nil) // the provider answered
	} else {
		leases.Answered(callErr)
	}
	class := "ok"
	if callErr != nil && !errors.Is(callErr, ErrNoSuchJob) {
		class = provider.ClassOf(callErr).String()
	}
	g.observe(c.Op, class, d)
	g.pauses.After(ctx, r, string(c.Op), answered(callErr))
	if c.Op == OpSubmit {
		log := cmp.Or(c.Log, &g.cfg.Logger)
		g.learn(ctx, callErr, before, leases, *log)
	}
	return st, callErr
}

// answered is a call's error as the route's pauses read it: a find that
// found nothing was answered.
func answered(err error) error {
	if errors.Is(err, ErrNoSuchJob) {
		return nil
	}
	return err
}

// observe hands a call's outcome to GateConfig.Observe.
func (g *Gate) observe(op Op, class string, d time.Duration) {
	if g.cfg.Observe != nil {
		g.cfg.Observe(g.Route.Name, op, class, d)
	}
}

// busyWait is the jittered wait after a call op found no lease free.
func (g *Gate) busyWait(op Op) time.Duration {
	def := 500 * time.Millisecond
	if op == OpStatus {
		def = 250 * time.Millisecond
	}
	return schedule.Jitter(cmp.Or(g.cfg.BusyWait, def), schedule.RetryJitter, g.cfg.Rand)
}

// call is the adapter's call: the one place in Pollux's services that
// calls a provider.
func (g *Gate) call(ctx context.Context, c Call) (provider.Status, error) {
	a := g.Route.Adapter
	if (c.Op == OpSubmit || c.Op == OpFind) && g.Route.Inputs != nil {
		in, err := g.Route.Inputs(ctx, c.Request.Input)
		if err != nil {
			return provider.Status{}, err
		}
		c.Request.Input = in
	}
	switch c.Op {
	case OpSubmit:
		return a.Submit(ctx, c.Request)
	case OpStatus:
		return a.Status(ctx, c.Ref)
	case OpCancel:
		return a.Cancel(ctx, c.Ref)
	case OpFind:
		f, ok := a.(provider.Finder)
		if !ok {
			return provider.Status{}, fmt.Errorf("route %s: %w", g.Route.Name, errCannotFind)
		}
		st, found, err := f.Find(ctx, c.Request)
		if err == nil && !found {
			err = ErrNoSuchJob
		}
		return st, err
	}
	return provider.Status{}, fmt.Errorf("route %s: unknown call %q", g.Route.Name, c.Op)
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
			log.Warn().Err(err).Str(logkey.Level, lvl.Level().String()).Msg("learning the running cap failed")
		case changed && refused:
			log.Warn().Str(logkey.Level, lvl.Level().String()).Int(logkey.RunningCap, limit).
				Msg("the provider refused a create at this many running: learned running cap lowered")
		case changed:
			log.Info().Str(logkey.Level, lvl.Level().String()).Int(logkey.RunningCap, limit).Msg("learned running cap raised after creates accepted at the cap")
		}
	}
}
