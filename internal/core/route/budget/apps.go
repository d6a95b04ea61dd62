package budget

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// An app's caps on its jobs hold across the fleet with the running slots'
// machinery (running.go), at two levels of the app's own:
//
//	running  (events.LevelApp, apps.<name>.max_running) its jobs sent to
//	         a provider and not yet ended: a level of every job's
//	         running slots, whichever route it takes (Apps.Running). A
//	         job that finds it full waits in the admission queue, as it
//	         does for a route's cap.
//	waiting  (events.LevelAppWaiting, apps.<name>.max_waiting) its jobs
//	         admitted and not yet sent: a slot taken when the job is
//	         admitted (Apps.Wait: a create past it is refused), freed when
//	         the job takes its running slots, just before its create
//	         (Apps.Started), or ends (Apps.Ended).
//
// Both are streams the server holds to the cap (one message per job), so
// three front doors admit what one would, and neither leaks when a
// process dies holding a slot: Repair frees a running slot no record
// names, and a waiting slot whose job was sent, ended, or not recorded
// within the repair's grace (RepairGrace) — ingest records a submission
// as soon as it takes it from the intake, and its admission takes the
// job's waiting slot again, so a slot freed while ingest was stopped is
// taken back.

// AppCap is an app's caps on its jobs across the fleet (0: none).
type AppCap struct {
	// Running caps its jobs sent to a provider and not yet ended.
	Running int
	// Waiting caps its jobs admitted and not yet sent to a provider.
	Waiting int
}

// Apps are the apps' caps on their jobs, one process's view: each app's
// levels are set up when first used. A nil *Apps caps nothing.
type Apps struct {
	js   jetstream.JetStream
	ns   events.Namespace
	o    events.Options
	caps map[string]AppCap

	mu     sync.Mutex
	levels map[string]*Running // by scope
}

// NewApps returns the caps of the apps in caps (by app) over the
// namespace's streams; nil when none caps anything.
func NewApps(js jetstream.JetStream, ns events.Namespace, o events.Options, caps map[string]AppCap) *Apps {
	a := &Apps{js: js, ns: ns, o: o, caps: map[string]AppCap{}, levels: map[string]*Running{}}
	for app, c := range caps {
		if c != (AppCap{}) {
			a.caps[app] = c
		}
	}
	if len(a.caps) == 0 {
		return nil
	}
	return a
}

// CapsRunning reports whether an app caps its running jobs: every route
// then needs an admission queue, where a job whose app is full waits.
func (a *Apps) CapsRunning() bool {
	if a == nil {
		return false
	}
	for _, c := range a.caps {
		if c.Running > 0 {
			return true
		}
	}
	return false
}

// level returns app's level of kind (events.LevelApp or LevelAppWaiting),
// set up on first use; nil when app does not cap it.
func (a *Apps) level(ctx context.Context, kind, app string) (*Running, error) {
	if a == nil || app == "" {
		return nil, nil
	}
	limit := a.caps[app].Running
	if kind == events.LevelAppWaiting {
		limit = a.caps[app].Waiting
	}
	if limit <= 0 {
		return nil, nil
	}
	l := Level{Level: kind, Name: app, Running: limit}
	a.mu.Lock()
	r := a.levels[l.Scope()]
	a.mu.Unlock()
	if r != nil {
		return r, nil
	}
	r, err := EnsureRunning(ctx, a.js, a.ns, l, a.o)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if have := a.levels[l.Scope()]; have != nil {
		return have, nil
	}
	a.levels[l.Scope()] = r
	return r, nil
}

// Running is app's running level, the first of a job's running slots
// (nil: the app caps none).
func (a *Apps) Running(ctx context.Context, app string) (*Running, error) {
	return a.level(ctx, events.LevelApp, app)
}

// WaitingFullError refuses an admission: the app has its max_waiting jobs
// waiting already.
type WaitingFullError struct {
	// App is the app, Cap its max_waiting.
	App string
	Cap int
}

func (e *WaitingFullError) Error() string {
	return fmt.Sprintf("app %s has %d jobs waiting to be sent to a provider, its max_waiting: one must start first", e.App, e.Cap)
}

// Wait takes job's waiting slot of its app (a job that holds it takes it
// again), or refuses with a *WaitingFullError when the app is at its
// max_waiting.
func (a *Apps) Wait(ctx context.Context, app, job string) error {
	r, err := a.level(ctx, events.LevelAppWaiting, app)
	if r == nil || err != nil {
		return err
	}
	_, ok, err := r.take(ctx, job)
	if err == nil && !ok {
		return &WaitingFullError{App: app, Cap: r.level.Running}
	}
	return err
}

// Started frees job's waiting slot of its app: the job takes its running
// slots now, or nothing was made of it (its create was not stored).
func (a *Apps) Started(ctx context.Context, app, job string) error {
	r, err := a.level(ctx, events.LevelAppWaiting, app)
	if r == nil || err != nil {
		return err
	}
	return r.release(ctx, job)
}

// Ended frees ended job j's waiting slot (one that ended while it
// waited: canceled, expired); its running slots are its record's, freed
// by the write that ended it.
func (a *Apps) Ended(ctx context.Context, j *state.Job) error {
	return a.Started(ctx, j.App, j.ID)
}

// Levels are every app's levels that cap anything, set up (Repair's: a
// process repairs the slots other processes took, of apps it has not
// served yet).
func (a *Apps) Levels(ctx context.Context) ([]*Running, error) {
	if a == nil {
		return nil, nil
	}
	var out []*Running
	for app := range a.caps {
		for _, kind := range []string{events.LevelApp, events.LevelAppWaiting} {
			r, err := a.level(ctx, kind, app)
			if err != nil {
				return out, err
			}
			if r != nil {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// holds reports whether job j, not ended, holds its slot of the level
// (Repair's test): a running slot its record names, or a waiting slot
// while nothing has been sent.
func (r *Running) holds(j *state.Job) bool {
	if r.level.Level == events.LevelAppWaiting {
		return j.RemoteID == "" && j.AttemptedAt.IsZero() && !j.SubmitInDoubt
	}
	return j.HoldsSlot(r.level.Scope())
}
