package index

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Config configures an Index. The zero value means the defaults given on
// each field.
type Config struct {
	// Logger receives the index's logs (default zerolog.Nop()).
	Logger zerolog.Logger
	// MaxJobs bounds the jobs held (default 1,000,000); beyond it the
	// oldest terminal jobs are forgotten first. Jobs not yet terminal are
	// never forgotten, so the index may hold more when they alone exceed
	// it.
	MaxJobs int
	// Now is the clock Activity's hour ends at (default time.Now).
	Now func() time.Time
}

// DefaultMaxJobs is Config.MaxJobs's default.
const DefaultMaxJobs = 1_000_000

// Index is the in-memory index of the jobs in the events stream. Its
// methods are safe for concurrent use; Run feeds it.
type Index struct {
	cfg    Config
	log    zerolog.Logger
	js     jetstream.JetStream
	ns     events.Namespace
	stream string

	mu      sync.RWMutex
	jobs    map[string]*item
	lists   map[listKey]*ordered // by (CreatedAt, ID): every job, each route's, state's, route and state's
	byKey   map[string][]*item   // idempotency key → jobs
	byRem   map[string][]*item   // remote id → jobs
	models  map[modelKey]int     // jobs by route, model and state
	waiting map[waitKey]int      // pending jobs by route and what they wait for
	routeEv map[string][]events.RouteEvent
	act     activity
	bytes   int64
	evict   int // the items of every job before it are not terminal (a hint)

	latest  uint64        // the greatest Entry.Stream applied (under mu)
	applied atomic.Uint64 // last stream sequence applied
	garbage atomic.Uint64

	subMu sync.Mutex
	subs  map[*subscriber]struct{}
}

// item is an indexed job.
type item struct {
	e    Entry
	gone bool // removed; still in ordered slices until compacted
}

// New returns an empty index of namespace ns's events; Run fills it. The
// events stream is res.Events (res may be nil: the namespace's events
// stream); Run looks it up by name through js each time it starts reading,
// so a restarted server's is found again.
func New(cfg Config, js jetstream.JetStream, ns events.Namespace, res *events.Resources) (*Index, error) {
	cfg.MaxJobs = cmp.Or(cfg.MaxJobs, DefaultMaxJobs)
	if cfg.MaxJobs < 0 {
		return nil, errors.New("index: MaxJobs must be positive")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if js == nil {
		return nil, errors.New("index: no JetStream")
	}
	x := &Index{
		cfg: cfg, log: cfg.Logger, js: js, ns: ns, stream: ns.EventsStream(),
		jobs:    map[string]*item{},
		lists:   map[listKey]*ordered{{}: {}},
		byKey:   map[string][]*item{},
		byRem:   map[string][]*item{},
		models:  map[modelKey]int{},
		waiting: map[waitKey]int{},
		routeEv: map[string][]events.RouteEvent{},
		act:     newActivity(),
		subs:    map[*subscriber]struct{}{},
	}
	if res != nil && res.Events != nil {
		x.stream = res.Events.CachedInfo().Config.Name
	}
	return x, nil
}

// Get returns the entry of job id.
func (x *Index) Get(id string) (Entry, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	it, ok := x.jobs[id]
	if !ok {
		return Entry{}, false
	}
	return it.e, true
}

// Routes returns the names of the routes that have jobs or route events
// in the index, sorted.
func (x *Index) Routes() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	seen := map[string]struct{}{}
	for k, o := range x.lists {
		if k.route != "" && k.state == "" && o.live > 0 {
			seen[k.route] = struct{}{}
		}
	}
	for r := range x.routeEv {
		seen[r] = struct{}{}
	}
	return slices.Sorted(maps.Keys(seen))
}

// Models returns the models of route's jobs ("" = every route), sorted.
func (x *Index) Models(route string) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	seen := map[string]struct{}{}
	for k := range x.models {
		if route == "" || k.route == route {
			seen[k.model] = struct{}{}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// Counts returns how many of route's jobs ("" = every route) are in each
// state. States without jobs are absent; rejections are not counted.
func (x *Index) Counts(route string) map[state.State]int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := map[state.State]int{}
	for k, o := range x.lists {
		if k.state != "" && k.route == route && o.live > 0 {
			out[k.state] = o.live
		}
	}
	return out
}

// Waiting returns how many of route's pending jobs ("" = every route's)
// wait before their submission, by what they wait for
// (state.Job.WaitingFor: a pause, a level's running slots, a queue).
func (x *Index) Waiting(route string) map[string]int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := map[string]int{}
	for k, n := range x.waiting {
		if route == "" || k.route == route {
			out[k.why] += n
		}
	}
	return out
}

// Size returns how many jobs the index holds and an estimate of the
// memory they take.
func (x *Index) Size() (jobs int, approxBytes int64) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.jobs), x.bytes
}

// RouteEvents returns route's latest route events (pause, resume), at most
// MaxRouteEvents, oldest first.
func (x *Index) RouteEvents(route string) []events.RouteEvent {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return slices.Clone(x.routeEv[route])
}

// MaxRouteEvents is how many route events the index keeps per route.
const MaxRouteEvents = 50

// Garbage returns how many messages on the events subjects were not
// events (or route events) and were ignored.
func (x *Index) Garbage() uint64 { return x.garbage.Load() }

// Applied returns the stream sequence of the latest message the index
// has read.
func (x *Index) Applied() uint64 { return x.applied.Load() }

// applyEvent applies a job's event, at stream sequence seq; it reports
// the entry when the index changed.
func (x *Index) applyEvent(ev *event, seq uint64) (Entry, bool) {
	e := entryOf(ev, seq)
	x.mu.Lock()
	defer x.mu.Unlock()
	old, ok := x.jobs[e.ID]
	if ok {
		switch {
		case e.Rejected && !old.e.Rejected:
			return Entry{}, false // a refused message about a job leaves the job as it is
		case !e.Rejected && e.Seq <= old.e.Seq:
			return Entry{}, false // a duplicate or an older event
		}
	}
	wasTerminal := ok && terminal(old.e)
	if ok && old.e.CreatedAt.Equal(e.CreatedAt) && old.e.Route == e.Route {
		x.update(old, e)
	} else {
		if ok {
			x.remove(old)
		}
		x.insert(&item{e: e})
	}
	if !wasTerminal && !e.Rejected && e.State.Terminal() && ev.Job != nil {
		x.act.add(ev.Route, ev.Time, ev.Job)
	}
	x.latest = max(x.latest, seq)
	x.trim()
	return e, true
}

// applyRouteEvent keeps a route's event.
func (x *Index) applyRouteEvent(ev *events.RouteEvent) {
	x.mu.Lock()
	defer x.mu.Unlock()
	l := append(x.routeEv[ev.Route], *ev)
	if len(l) > MaxRouteEvents {
		l = slices.Clone(l[len(l)-MaxRouteEvents:])
	}
	x.routeEv[ev.Route] = l
}

// terminal reports whether e may be forgotten to make room.
func terminal(e Entry) bool { return e.Rejected || e.State.Terminal() }

// all is the list of every job.
func (x *Index) all() *ordered { return x.lists[listKey{}] }

// list returns (making it) the list of k.
func (x *Index) list(k listKey) *ordered {
	o := x.lists[k]
	if o == nil {
		o = &ordered{state: k.state}
		x.lists[k] = o
	}
	return o
}

// insert adds a new item.
func (x *Index) insert(it *item) {
	x.jobs[it.e.ID] = it
	for _, k := range listKeys(&it.e) {
		if p := x.list(k).insert(it); k == (listKey{}) && p < x.evict {
			x.evict = p
		}
	}
	x.account(it.e)
}

// update replaces the entry of it by e, of the same route and creation
// time (its place in the lists).
func (x *Index) update(it *item, e Entry) {
	was := it.e
	x.unaccount(was)
	it.e = e
	x.account(e)
	if was.State != e.State {
		if was.State != "" {
			x.lists[listKey{state: was.State}].leave()
			x.lists[listKey{was.Route, was.State}].leave()
		}
		if e.State != "" {
			x.list(listKey{state: e.State}).enter(it)
			x.list(listKey{e.Route, e.State}).enter(it)
		}
	}
	if !terminal(was) && terminal(e) {
		if p := x.all().index(it); p >= 0 && p < x.evict {
			x.evict = p
		}
	}
}

// remove forgets an item.
func (x *Index) remove(it *item) {
	delete(x.jobs, it.e.ID)
	it.gone = true
	for _, k := range listKeys(&it.e) {
		if x.lists[k].leave() && k == (listKey{}) {
			x.evict = 0
		}
	}
	x.unaccount(it.e)
}

// modelKey names a count of jobs by route, model and state.
type modelKey struct {
	route, model string
	state        state.State
}

// waitKey names a count of pending jobs by route and what they wait for.
type waitKey struct{ route, why string }

// waits reports whether e is a pending job waiting before its submission.
func waits(e Entry) bool { return e.State == state.Pending && e.WaitingFor != "" }

// account adds e to the model and waiting counts, the search maps and the
// size.
func (x *Index) account(e Entry) {
	if e.Model != "" {
		x.models[modelKey{e.Route, e.Model, e.State}]++
	}
	if waits(e) {
		x.waiting[waitKey{e.Route, e.WaitingFor}]++
	}
	it := x.jobs[e.ID]
	if e.IdempotencyKey != "" {
		x.byKey[e.IdempotencyKey] = append(x.byKey[e.IdempotencyKey], it)
	}
	if e.RemoteID != "" {
		x.byRem[e.RemoteID] = append(x.byRem[e.RemoteID], it)
	}
	x.bytes += entryBytes(e)
}

// unaccount undoes account.
func (x *Index) unaccount(e Entry) {
	if k := (modelKey{e.Route, e.Model, e.State}); e.Model != "" {
		if x.models[k]--; x.models[k] <= 0 {
			delete(x.models, k)
		}
	}
	if k := (waitKey{e.Route, e.WaitingFor}); waits(e) {
		if x.waiting[k]--; x.waiting[k] <= 0 {
			delete(x.waiting, k)
		}
	}
	drop(x.byKey, e.IdempotencyKey, e.ID)
	drop(x.byRem, e.RemoteID, e.ID)
	x.bytes -= entryBytes(e)
}

// drop removes job id from m[k].
func drop(m map[string][]*item, k, id string) {
	if k == "" {
		return
	}
	l := slices.DeleteFunc(m[k], func(it *item) bool { return it.e.ID == id })
	if len(l) == 0 {
		delete(m, k)
		return
	}
	m[k] = l
}

// trim forgets the oldest terminal jobs beyond MaxJobs.
func (x *Index) trim() {
	for len(x.jobs) > x.cfg.MaxJobs {
		it, p := x.all().firstFrom(x.evict, func(it *item) bool { return terminal(it.e) })
		if it == nil {
			x.evict = p
			return
		}
		x.evict = p
		x.remove(it)
	}
}

// entryBytes estimates the memory an entry takes in the index: the item,
// its strings, its place in the ordered slices and maps.
func entryBytes(e Entry) int64 {
	n := int64(itemSize + 4*8 + 64) // four lists, the jobs map's entry
	n += int64(len(e.ID) + len(e.Route) + len(e.Model) + len(e.RemoteID) + len(e.IdempotencyKey) + len(e.Reason) + len(e.WaitingFor) + len(e.RejectionError))
	if e.IdempotencyKey != "" {
		n += 64
	}
	if e.RemoteID != "" {
		n += 64
	}
	if e.Progress != nil {
		n += 8
	}
	if e.QueuePosition != nil {
		n += 8
	}
	return n
}

// eventSubject splits an events subject into its route and job ("" for a
// route's own subject).
func (x *Index) eventSubject(subject string) (route, job string, ok bool) {
	rest, ok := strings.CutPrefix(subject, x.ns.Prefix()+".events.")
	if !ok {
		return "", "", false
	}
	route, job, _ = strings.Cut(rest, ".")
	if strings.Contains(job, ".") {
		return "", "", false
	}
	return route, job, true
}
