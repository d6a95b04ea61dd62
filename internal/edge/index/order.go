package index

import (
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/pollux-dev/pollux/pkg/state"
)

// itemSize is the memory of an item itself.
const itemSize = int(unsafe.Sizeof(item{}))

// key is a job's place in the order: by creation time, then id.
type key struct {
	at time.Time
	id string
}

func keyOf(it *item) key { return key{it.e.CreatedAt, it.e.ID} }

// compare orders keys oldest first.
func (k key) compare(o key) int {
	if c := k.at.Compare(o.at); c != 0 {
		return c
	}
	return strings.Compare(k.id, o.id)
}

// listKey names one of the index's ordered lists: every job ("", ""), a
// route's, a state's, or a route's jobs in a state.
type listKey struct {
	route string
	state state.State
}

// listKeys returns the lists e belongs to.
func listKeys(e *Entry) []listKey {
	if e.State == "" {
		return []listKey{{}, {route: e.Route}}
	}
	return []listKey{{}, {route: e.Route}, {state: e.State}, {e.Route, e.State}}
}

// ordered is a list of items sorted oldest first by key. An item that
// leaves it (forgotten, or no longer in the list's state) stays in place,
// skipped, its key keeping the order searchable, until compact drops the
// items that left all at once.
//
// A sorted slice rather than a tree: events arrive nearly in creation
// order, so an insert is almost always an append, and a page is a
// contiguous run read backwards from a binary search.
type ordered struct {
	items []*item
	state state.State // "": any state
	live  int
	dead  int
}

// holds reports whether it is one of o's items (not one that left).
func (o *ordered) holds(it *item) bool {
	return !it.gone && (o.state == "" || it.e.State == o.state)
}

// search returns the index of the first item whose key is at least k.
func (o *ordered) search(k key) int {
	i, _ := slices.BinarySearchFunc(o.items, k, func(it *item, k key) int { return keyOf(it).compare(k) })
	return i
}

// searchTime returns the index of the first item created at t or later.
func (o *ordered) searchTime(t time.Time) int {
	i, _ := slices.BinarySearchFunc(o.items, t, func(it *item, t time.Time) int { return it.e.CreatedAt.Compare(t) })
	return i
}

// insert adds it and returns its index.
func (o *ordered) insert(it *item) int {
	o.live++
	n := len(o.items)
	if n == 0 || keyOf(o.items[n-1]).compare(keyOf(it)) <= 0 {
		o.items = append(o.items, it)
		return n
	}
	i := o.search(keyOf(it))
	o.items = slices.Insert(o.items, i, it)
	return i
}

// enter adds it, which now belongs to o: back in its old place if it
// left o and is still there.
func (o *ordered) enter(it *item) {
	if o.index(it) >= 0 {
		o.live++
		o.dead--
		return
	}
	o.insert(it)
}

// index returns the index of it, -1 when o does not have it in place.
func (o *ordered) index(it *item) int {
	k := keyOf(it)
	for i := o.search(k); i < len(o.items); i++ {
		if o.items[i] == it {
			return i
		}
		if keyOf(o.items[i]).compare(k) != 0 {
			break
		}
	}
	return -1
}

// leave records that one of o's items left it; it reports whether o
// compacted (its indexes changed).
func (o *ordered) leave() bool {
	o.live--
	o.dead++
	if o.dead > len(o.items)/4+64 {
		o.items = slices.DeleteFunc(o.items, func(it *item) bool { return !o.holds(it) })
		o.dead = 0
		if cap(o.items) > 2*len(o.items)+1024 {
			o.items = slices.Clip(o.items)
		}
		return true
	}
	return false
}

// firstFrom returns the first item o holds at or after index i that ok
// accepts, and its index; nil and the length when there is none.
func (o *ordered) firstFrom(i int, ok func(*item) bool) (*item, int) {
	for ; i < len(o.items); i++ {
		if it := o.items[i]; o.holds(it) && ok(it) {
			return it, i
		}
	}
	return nil, len(o.items)
}

// walker walks lists newest first together, as one list.
type walker struct {
	lists []*ordered
	pos   []int // the next item of lists[k] is lists[k].items[pos[k]-1]
	lo    []int // lists[k]'s walk ends at index lo[k]
}

// newWalker walks lists from the newest item before `before` (the end
// when nil) down to the oldest created after `after` (zero: no bound).
func newWalker(lists []*ordered, after time.Time, before *key) *walker {
	w := &walker{lists: lists, pos: make([]int, len(lists)), lo: make([]int, len(lists))}
	for k, o := range lists {
		w.pos[k] = len(o.items)
		if before != nil {
			w.pos[k] = o.search(*before)
		}
		if !after.IsZero() {
			w.lo[k] = min(o.searchTime(after.Add(1)), w.pos[k])
		}
	}
	return w
}

// next returns the next item, nil at the end.
func (w *walker) next() *item {
	best := -1
	for k, o := range w.lists {
		for w.pos[k] > w.lo[k] && !o.holds(o.items[w.pos[k]-1]) {
			w.pos[k]--
		}
		if w.pos[k] > w.lo[k] && (best < 0 || keyOf(o.items[w.pos[k]-1]).compare(keyOf(w.lists[best].items[w.pos[best]-1])) > 0) {
			best = k
		}
	}
	if best < 0 {
		return nil
	}
	w.pos[best]--
	return w.lists[best].items[w.pos[best]]
}
