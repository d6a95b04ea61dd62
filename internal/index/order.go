package index

import (
	"slices"
	"strings"
	"time"
	"unsafe"
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

// ordered holds items sorted oldest first by key. Removing an item marks
// it gone and leaves it in place (its key keeps the order searchable)
// until compact drops the gone ones all at once.
//
// A sorted slice rather than a tree: events arrive nearly in creation
// order, so an insert is almost always an append, and a page is a
// contiguous run read backwards from a binary search.
type ordered struct {
	items []*item
	live  int
	dead  int
}

// search returns the index of the first item whose key is at least k.
func (o *ordered) search(k key) int {
	i, _ := slices.BinarySearchFunc(o.items, k, func(it *item, k key) int { return keyOf(it).compare(k) })
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

// index returns the index of it, which o holds.
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

// removed records that one of o's items is gone; it reports whether o
// compacted (its indexes changed).
func (o *ordered) removed() bool {
	o.live--
	o.dead++
	if o.dead > len(o.items)/4+64 {
		o.compact()
		return true
	}
	return false
}

// compact drops the gone items.
func (o *ordered) compact() {
	o.items = slices.DeleteFunc(o.items, func(it *item) bool { return it.gone })
	o.dead = 0
	if cap(o.items) > 2*len(o.items)+1024 {
		o.items = slices.Clip(o.items)
	}
}

// firstFrom returns the first live item at or after index i that ok
// accepts, and its index; nil and the length when there is none.
func (o *ordered) firstFrom(i int, ok func(*item) bool) (*item, int) {
	for ; i < len(o.items); i++ {
		if it := o.items[i]; !it.gone && ok(it) {
			return it, i
		}
	}
	return nil, len(o.items)
}
