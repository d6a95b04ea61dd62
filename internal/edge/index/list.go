package index

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/tenant"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Query selects and pages jobs. The zero value lists every job, newest
// first, 50 at a time.
type Query struct {
	// Route keeps one route's jobs ("" = every route).
	Route string
	// States keeps jobs in one of these states (none = any state,
	// rejections included).
	States []state.State
	// Model keeps one model's jobs.
	Model string
	// CreatedAfter and CreatedBefore keep jobs created strictly after and
	// strictly before them (zero = no bound).
	CreatedAfter, CreatedBefore time.Time
	// Face keeps the jobs a provider face made (Entry.Face).
	Face face.Kind
	// Viewer keeps the jobs it may see (Entry.App; the zero Viewer sees
	// every app's).
	Viewer tenant.Viewer
	// Search keeps the jobs whose id, idempotency key or remote id is
	// exactly this.
	Search string
	// Cursor is a previous page's Next: the page after it.
	Cursor string
	// Limit is the page's size (default DefaultLimit, at most MaxLimit).
	Limit int
}

// Page sizes.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// TotalCap is how far Page.Total is counted by a walk, when the index
// has no running count for the query (one with a time range or a
// search): a walk stops there and sets TotalCapped.
const TotalCap = 10_000

// Page is one page of a query's jobs.
type Page struct {
	// Jobs are the page's jobs, newest first (empty, not nil, when none).
	Jobs []Entry `json:"jobs"`
	// Next is the cursor of the next page, "" at the end.
	Next string `json:"next"`
	// Total counts the query's matches (on every page, not after the
	// cursor). TotalCapped says that counting stopped at TotalCap and
	// more than Total match.
	Total       int  `json:"total"`
	TotalCapped bool `json:"total_capped"`
}

// ErrBadCursor reports a cursor that no page of the index gave.
var ErrBadCursor = errors.New("bad cursor")

// List returns a page of the jobs q selects, newest first by CreatedAt
// then ID (a job created at the same time as another but with a greater
// id comes first). Paging with Next is stable while jobs are added: a
// cursor names a place in that order, not an offset.
func (x *Index) List(q Query) (Page, error) {
	limit := q.Limit
	switch {
	case limit < 0:
		return Page{}, fmt.Errorf("limit %d: must not be negative (0 means %d)", limit, DefaultLimit)
	case limit == 0:
		limit = DefaultLimit
	case limit > MaxLimit:
		limit = MaxLimit
	}
	var cursor *key
	if q.Cursor != "" {
		k, err := parseCursor(q.Cursor)
		if err != nil {
			return Page{}, err
		}
		cursor = &k
	}
	m := newMatcher(q)
	// The page starts below the cursor and below CreatedBefore.
	upper := cursor
	if !q.CreatedBefore.IsZero() && (upper == nil || q.CreatedBefore.Before(upper.at)) {
		upper = &key{at: q.CreatedBefore}
	}

	x.mu.RLock()
	defer x.mu.RUnlock()
	lists := x.sources(q, m)
	// Sized for a full page (up to 100) or for all the lists hold if
	// fewer: growing it would allocate twice what a page holds, and every
	// byte allocated here costs a share of marking the index's heap.
	held := 0
	for _, o := range lists {
		held += len(o.items)
	}
	p := Page{Jobs: make([]Entry, 0, min(limit, 100, held))}
	w := newWalker(lists, q.CreatedAfter, upper)
	for it := w.next(); it != nil; it = w.next() {
		if !m.match(&it.e) {
			continue
		}
		if len(p.Jobs) == limit {
			p.Next = cursorOf(p.Jobs[limit-1])
			break
		}
		p.Jobs = append(p.Jobs, it.e)
	}

	if total, ok := x.countFor(q, m); ok {
		p.Total = total
		return p, nil
	}
	var before *key
	if !q.CreatedBefore.IsZero() {
		before = &key{at: q.CreatedBefore}
	}
	// The lists are disjoint: count each on its own. A list without items
	// that left it, under no filter but its own and the time range, counts
	// by its indexes alone.
	for _, o := range lists {
		w := newWalker([]*ordered{o}, q.CreatedAfter, before)
		if o.dead == 0 && q.Model == "" && q.Face == "" && q.Search == "" && !q.Viewer.Scoped {
			p.Total += w.pos[0] - w.lo[0]
			continue
		}
		for it := w.next(); it != nil && !p.TotalCapped; it = w.next() {
			switch {
			case !m.match(&it.e):
			case p.Total >= TotalCap:
				p.TotalCapped = true
			default:
				p.Total++
			}
		}
	}
	return p, nil
}

// sources returns the lists whose items q may select: the jobs a search
// finds, else the lists of q's route and states.
func (x *Index) sources(q Query, m matcher) []*ordered {
	if q.Search != "" {
		return []*ordered{{items: x.searched(q.Search)}}
	}
	if len(m.states) == 0 {
		if o := x.lists[listKey{route: q.Route}]; o != nil {
			return []*ordered{o}
		}
		return nil
	}
	var out []*ordered
	for _, s := range m.states {
		if o := x.lists[listKey{q.Route, s}]; o != nil {
			out = append(out, o)
		}
	}
	return out
}

// countFor returns the query's total from the running counts, when it
// filters by nothing but route, states and model.
func (x *Index) countFor(q Query, m matcher) (int, bool) {
	if q.Search != "" || q.Face != "" || q.Viewer.Scoped || !q.CreatedAfter.IsZero() || !q.CreatedBefore.IsZero() {
		return 0, false
	}
	n := 0
	switch {
	case q.Model != "":
		for k, c := range x.models {
			if k.model == q.Model && (q.Route == "" || k.route == q.Route) && (len(m.states) == 0 || slices.Contains(m.states, k.state)) {
				n += c
			}
		}
	case len(m.states) == 0:
		if o := x.lists[listKey{route: q.Route}]; o != nil {
			n = o.live
		}
	default:
		for _, s := range m.states {
			if o := x.lists[listKey{q.Route, s}]; o != nil {
				n += o.live
			}
		}
	}
	return n, true
}

// searched returns the jobs whose id, idempotency key or remote id is s,
// in the index's order.
func (x *Index) searched(s string) []*item {
	var out []*item
	if it, ok := x.jobs[s]; ok {
		out = append(out, it)
	}
	for _, l := range [][]*item{x.byKey[s], x.byRem[s]} {
		for _, it := range l {
			if !slices.Contains(out, it) {
				out = append(out, it)
			}
		}
	}
	slices.SortFunc(out, func(a, b *item) int { return keyOf(a).compare(keyOf(b)) })
	return out
}

// matcher tests entries against a query's filters (not its search).
type matcher struct {
	route, model string
	face         face.Kind
	viewer       tenant.Viewer
	states       []state.State
	after        time.Time
	before       time.Time
}

func newMatcher(q Query) matcher {
	m := matcher{route: q.Route, model: q.Model, face: q.Face, viewer: q.Viewer, after: q.CreatedAfter, before: q.CreatedBefore}
	for _, s := range q.States {
		if !slices.Contains(m.states, s) {
			m.states = append(m.states, s)
		}
	}
	return m
}

func (m matcher) match(e *Entry) bool {
	switch {
	case m.route != "" && e.Route != m.route,
		m.model != "" && e.Model != m.model,
		m.face != "" && e.Face() != m.face,
		!m.viewer.SeesApp(e.App),
		len(m.states) > 0 && !slices.Contains(m.states, e.State),
		!m.after.IsZero() && !e.CreatedAt.After(m.after),
		!m.before.IsZero() && !e.CreatedAt.Before(m.before):
		return false
	}
	return true
}

// CursorAt returns the cursor of the page after job id (a list that
// names its pages by their last item's id, as provider APIs do).
func (x *Index) CursorAt(id string) (string, bool) {
	e, ok := x.Get(id)
	if !ok {
		return "", false
	}
	return cursorOf(e), true
}

// A cursor is "<created unix nanoseconds>.<id>" in unpadded base64url: the
// place of the last job of a page.
func cursorOf(e Entry) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(e.CreatedAt.UnixNano(), 10) + "." + e.ID))
}

func parseCursor(c string) (key, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return key{}, fmt.Errorf("%w %q: not a cursor a page gave (not base64url)", ErrBadCursor, c)
	}
	at, id, ok := strings.Cut(string(b), ".")
	if !ok || id == "" {
		return key{}, fmt.Errorf("%w %q: not a cursor a page gave", ErrBadCursor, c)
	}
	n, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return key{}, fmt.Errorf("%w %q: not a cursor a page gave (no time)", ErrBadCursor, c)
	}
	return key{time.Unix(0, n), id}, nil
}

// StateCounts returns how many jobs match q's filters but its states (its
// route, model, time range and search; not its cursor or limit), by
// state: what each state would list. Rejections are not counted. From the
// running counts when q filters by nothing but route and model; else by a
// walk that stops at TotalCap jobs, and capped says it stopped.
func (x *Index) StateCounts(q Query) (counts map[state.State]int, capped bool) {
	q.States, q.Cursor = nil, ""
	m := newMatcher(q)
	counts = map[state.State]int{}
	x.mu.RLock()
	defer x.mu.RUnlock()
	fast := q.Search == "" && q.CreatedAfter.IsZero() && q.CreatedBefore.IsZero() && !q.Viewer.Scoped
	switch {
	case fast && q.Model != "":
		for k, n := range x.models {
			if k.model == q.Model && (q.Route == "" || k.route == q.Route) && k.state != "" {
				counts[k.state] += n
			}
		}
		return counts, false
	case fast:
		for k, o := range x.lists {
			if k.state != "" && k.route == q.Route && o.live > 0 {
				counts[k.state] = o.live
			}
		}
		return counts, false
	}
	var before *key
	if !q.CreatedBefore.IsZero() {
		before = &key{at: q.CreatedBefore}
	}
	n := 0
	w := newWalker(x.sources(q, m), q.CreatedAfter, before)
	for it := w.next(); it != nil; it = w.next() {
		if it.e.State == "" || !m.match(&it.e) {
			continue
		}
		if n == TotalCap {
			return counts, true
		}
		counts[it.e.State]++
		n++
	}
	return counts, false
}
