package budget

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Running slots cap the jobs a level has running at the provider: jobs
// created there and not yet ended. A slot is a message on a stream of the
// level's own (events.RunningStreamConfig), on the subject of its job, and
// the stream holds at most the level's cap of them: the server refuses a
// take past the cap, and a second take by the same job, so the cap holds
// across the fleet with one publish per take.
//
// A submission takes its slots just before its create call (the job's
// record then names them, state.Job.Slots) and waits in JetStream while a
// level is full. The write that ends the job clears Slots, and its writer
// releases them (purging the job's subject, which a second time does
// nothing). A process that dies between the end and the release, or
// between a take and the write that records it, leaves a slot no job
// holds: Repair, run by every ingest process every RepairInterval, finds
// and frees it.

// RepairGrace is how old a slot whose job does not name it must be before
// Repair frees it, by default: the take happens just before the write
// that records it, and this is far longer than that takes.
const RepairGrace = 2 * time.Minute

// EndGrace is how long after the write that ended a job Repair leaves
// the job's slot to that write's writer, which frees it just after: a
// repair in between would free it first and count a repair nothing
// needed (and log a process that died when none did).
const EndGrace = 10 * time.Second

// Running is one level's running slots.
type Running struct {
	level  Level
	js     jetstream.JetStream
	ns     events.Namespace
	stream jetstream.Stream
	// accepted counts creates accepted in a row by this process (a
	// learning level's probe).
	accepted atomic.Int64
}

// Uncapped is the running cap a level that learns its cap starts from when
// none is configured.
const Uncapped = 100_000

// ProbeEvery is how many creates a learning level's process must see
// accepted in a row, at its cap, before it raises the cap by one.
const ProbeEvery = 100

// configuredKey is the stream metadata key of a level's configured cap: a
// learned cap (the stream's MaxMsgs) is kept across restarts while the
// configuration stays the same.
const configuredKey = "pollux_running_configured"

// EnsureRunning sets up the running slots of level l (its cap l.Running,
// changed live on any process's start: a lower cap keeps the slots taken
// and refuses takes until enough jobs end). A level that learns its cap
// keeps the cap it learned unless its configured cap changed.
func EnsureRunning(ctx context.Context, js jetstream.JetStream, ns events.Namespace, l Level, o events.Options) (*Running, error) {
	limit := l.Running
	if limit <= 0 {
		limit = Uncapped
	}
	want := ns.RunningStreamConfig(l.Level, l.Name, limit, o)
	want.Metadata = map[string]string{configuredKey: strconv.Itoa(limit)}
	if l.Learn {
		have, err := js.Stream(ctx, want.Name)
		switch {
		case err == nil:
			c := have.CachedInfo().Config
			if c.Metadata[configuredKey] == want.Metadata[configuredKey] && c.MaxMsgs > 0 && c.MaxMsgs < int64(limit) {
				want.MaxMsgs = c.MaxMsgs // learned
			}
		case !errors.Is(err, jetstream.ErrStreamNotFound):
			return nil, fmt.Errorf("running slots of %s: %w", l, err)
		}
	}
	s, err := events.EnsureStream(ctx, js, want)
	if err != nil {
		return nil, fmt.Errorf("running slots of %s: %w", l, err)
	}
	return &Running{level: l, js: js, ns: ns, stream: s}, nil
}

// Refused learns from a create the provider refused with a rate limit
// that names no Retry-After (what a concurrency cap answers). The
// provider's running jobs all hold slots here, the refused job's aside,
// so its cap is below the slots taken when it refused: the level's cap
// becomes one less than that, at least 1, unless it is lower already. The count is read after the
// answer, when jobs that ended meanwhile have freed theirs; before is the
// count read just before the call (Slots.Before), and the larger of the
// two is taken, so an end between the two reads does not take the cap
// below the provider's. It returns the cap, and whether it lowered it; a
// level that does not learn changes nothing.
func (r *Running) Refused(ctx context.Context, before int) (limit int, lowered bool, err error) {
	r.accepted.Store(0)
	if !r.level.Learn {
		return 0, false, nil
	}
	info, err := r.stream.Info(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("running slots of %s: %w", r.level, err)
	}
	cur := int(info.Config.MaxMsgs)
	// A job refused while more slots were taken than the cap (a cap just
	// lowered keeps the slots taken) says nothing the cap does not.
	next := max(1, min(cur, max(before, int(info.State.Msgs))-1))
	if next >= cur {
		return cur, false, nil
	}
	return next, true, r.setCap(ctx, info.Config, next)
}

// Accepted learns from a create the provider accepted: after ProbeEvery
// in a row with the level at its cap, the cap rises by one (up to the
// configured cap). It returns the cap, and whether it raised it.
func (r *Running) Accepted(ctx context.Context) (limit int, raised bool, err error) {
	if !r.level.Learn || r.accepted.Add(1)%ProbeEvery != 0 {
		return 0, false, nil
	}
	info, err := r.stream.Info(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("running slots of %s: %w", r.level, err)
	}
	cur := int(info.Config.MaxMsgs)
	configured, _ := strconv.Atoi(info.Config.Metadata[configuredKey])
	if cur >= configured || int(info.State.Msgs) < cur {
		return cur, false, nil // at the configured cap, or not at the cap: nothing to probe
	}
	return cur + 1, true, r.setCap(ctx, info.Config, cur+1)
}

// setCap sets the level's cap fleet-wide: the server holds it.
func (r *Running) setCap(ctx context.Context, c jetstream.StreamConfig, limit int) error {
	c.MaxMsgs = int64(limit)
	if _, err := r.js.UpdateStream(ctx, c); err != nil {
		return fmt.Errorf("running slots of %s: set the learned cap %d: %w", r.level, limit, err)
	}
	return nil
}

// Level is the level whose slots these are.
func (r *Running) Level() Level { return r.level }

// take takes job's slot and returns it; false when the level is full. A
// job that holds its slot already gets it again.
func (r *Running) take(ctx context.Context, job string) (state.Slot, bool, error) {
	subject := r.ns.Running(r.level.Scope(), job)
	ack, err := r.js.Publish(ctx, subject, nil)
	switch {
	case err == nil:
		return state.Slot{Scope: r.level.Scope(), Seq: ack.Sequence}, true, nil
	case events.IsAPIError(err, events.CodeStoreFailed):
		// "maximum messages per subject exceeded": the job's slot is
		// there; "maximum messages exceeded": the level is full.
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Description, "per subject") {
			return state.Slot{}, false, nil
		}
		m, err := r.stream.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return r.take(ctx, job) // freed meanwhile
		}
		if err != nil {
			return state.Slot{}, false, fmt.Errorf("take a running slot of %s: %w", r.level, err)
		}
		return state.Slot{Scope: r.level.Scope(), Seq: m.Sequence}, true, nil
	}
	return state.Slot{}, false, fmt.Errorf("take a running slot of %s: %w", r.level, err)
}

// InUse is how many of the level's slots are taken.
func (r *Running) InUse(ctx context.Context) (int, error) {
	info, err := r.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("running slots of %s: %w", r.level, err)
	}
	return int(info.State.Msgs), nil
}

// Slots are the running slots a route's submissions take, narrowest level
// first. Nil caps nothing.
type Slots []*Running

// Before reads, just before a create call, how many slots each level that
// learns its cap has taken (0 at the others, and at a level whose count
// could not be read): what Running.Refused learns from.
func (s Slots) Before(ctx context.Context) []int {
	var n []int
	for i, r := range s {
		if !r.level.Learn {
			continue
		}
		if n == nil {
			n = make([]int, len(s))
		}
		n[i], _ = r.InUse(ctx)
	}
	return n
}

// Take takes job's slot at every level it does not hold one at already
// (have: the slots its record names) and returns the slots it holds then.
// When a level is full it releases what it took and returns full, the
// level that is full; the job waits.
func (s Slots) Take(ctx context.Context, job string, have []state.Slot) (held []state.Slot, full *Running, err error) {
	held = slices.Clone(have)
	holds := func(scope string) bool {
		return slices.ContainsFunc(have, func(sl state.Slot) bool { return sl.Scope == scope })
	}
	var took []*Running
	undo := func() {
		for _, r := range took {
			_ = r.release(context.WithoutCancel(ctx), job)
		}
	}
	for _, r := range s {
		if holds(r.level.Scope()) {
			continue
		}
		sl, ok, err := r.take(ctx, job)
		if err != nil || !ok {
			undo()
			if err != nil {
				return have, nil, err
			}
			return have, r, nil
		}
		took = append(took, r)
		held = append(held, sl)
	}
	return held, nil, nil
}

// Free frees job's slots at the levels it holds none at by keep.
func (s Slots) Free(ctx context.Context, job string, keep []state.Slot) error {
	var errs []error
	for _, r := range s {
		if !slices.ContainsFunc(keep, func(sl state.Slot) bool { return sl.Scope == r.level.Scope() }) {
			errs = append(errs, r.release(ctx, job))
		}
	}
	return errors.Join(errs...)
}

func (r *Running) release(ctx context.Context, job string) error {
	return r.stream.Purge(ctx, jetstream.WithPurgeSubject(r.ns.Running(r.level.Scope(), job)))
}

// Repair frees the level's slots that no job holds: slots of jobs that
// ended (their end was written, their release was not) once the end is
// EndGrace old, and of jobs that do not exist or whose record does not
// name the slot (a take whose write never landed) once the slot is older
// than grace (RepairGrace when 0). get
// reads a job's record (state.ErrNotFound when there is none). It returns
// how many slots it freed; any process may run it at any time.
func (r *Running) Repair(ctx context.Context, get func(context.Context, string) (*state.Job, error), now time.Time, grace time.Duration) (int, error) {
	grace = cmp.Or(grace, RepairGrace)
	scope := r.level.Scope()
	info, err := r.stream.Info(ctx, jetstream.WithSubjectFilter(r.ns.Running(scope, "*")))
	if err != nil {
		return 0, fmt.Errorf("running slots of %s: %w", r.level, err)
	}
	freed := 0
	for subject := range info.State.Subjects {
		job := r.ns.RunningJob(subject)
		j, err := get(ctx, job)
		if err != nil && !errors.Is(err, state.ErrNotFound) {
			return freed, fmt.Errorf("repair running slots of %s: %w", r.level, err)
		}
		if j != nil && !j.State.Terminal() && r.holds(j) {
			continue // held
		}
		if j != nil && j.State.Terminal() && now.Sub(j.UpdatedAt) < EndGrace {
			continue // just ended: its writer is freeing it
		}
		if j == nil || !j.State.Terminal() {
			m, err := r.stream.GetLastMsgForSubject(ctx, subject)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue // released meanwhile
			}
			if err != nil {
				return freed, fmt.Errorf("repair running slots of %s: %w", r.level, err)
			}
			if now.Sub(m.Time) < grace {
				continue // being taken: its write is under way
			}
		}
		if err := r.release(ctx, job); err != nil {
			return freed, fmt.Errorf("repair running slots of %s: %w", r.level, err)
		}
		freed++
	}
	return freed, nil
}

// Releaser frees the running slots of jobs that ended, as their records
// named them: each by its sequence (a delete), or, when that is not known,
// by its job's subject (a purge, which costs the server more). It finds
// each level's stream by its scope, once.
type Releaser struct {
	js jetstream.JetStream
	ns events.Namespace

	mu      sync.Mutex
	streams map[string]jetstream.Stream
}

// NewReleaser returns a releaser for the namespace's running slots.
func NewReleaser(js jetstream.JetStream, ns events.Namespace) *Releaser {
	return &Releaser{js: js, ns: ns, streams: map[string]jetstream.Stream{}}
}

// Release frees job's slots. Releasing a slot twice, or one the job does
// not hold, does nothing (a sequence is never reused); a level whose
// stream is gone (its cap removed) has nothing to free.
func (r *Releaser) Release(ctx context.Context, job string, slots []state.Slot) error {
	var errs []error
	for _, sl := range slots {
		s, err := r.stream(ctx, sl.Scope)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		switch {
		case err != nil:
		case sl.Seq > 0:
			if err = s.DeleteMsg(ctx, sl.Seq); events.IsAPIError(err, events.CodeNoMessage) || errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
				err = nil // freed already
			}
		default:
			err = s.Purge(ctx, jetstream.WithPurgeSubject(r.ns.Running(sl.Scope, job)))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("release the running slot of job %s in %s: %w", job, sl.Scope, err))
		}
	}
	return errors.Join(errs...)
}

func (r *Releaser) stream(ctx context.Context, scope string) (jetstream.Stream, error) {
	r.mu.Lock()
	s, ok := r.streams[scope]
	r.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := r.js.Stream(ctx, r.ns.RunningStream(events.ParseScope(scope)))
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.streams[scope] = s
	r.mu.Unlock()
	return s, nil
}
