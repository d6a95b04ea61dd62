package index

import (
	"cmp"
	"context"
	"slices"

	"github.com/pollux-dev/pollux/internal/edge/tenant"
)

// DefaultSubscribeBuffer is Subscribe's buffer when it is given none.
const DefaultSubscribeBuffer = 64

// subscriber is one Subscribe's channel.
type subscriber struct {
	ch chan Entry
}

// Subscribe returns a channel of the entries the index changes from now
// on, closed when ctx ends. The channel holds buf entries (default
// DefaultSubscribeBuffer); when it is full the subscriber loses updates:
// the index never waits for it.
func (x *Index) Subscribe(ctx context.Context, buf int) <-chan Entry {
	if buf <= 0 {
		buf = DefaultSubscribeBuffer
	}
	s := &subscriber{ch: make(chan Entry, buf)}
	x.subMu.Lock()
	x.subs[s] = struct{}{}
	x.subMu.Unlock()
	context.AfterFunc(ctx, func() {
		x.subMu.Lock()
		defer x.subMu.Unlock()
		delete(x.subs, s)
		close(s.ch)
	})
	return s.ch
}

// broadcast offers e to every subscriber without waiting.
func (x *Index) broadcast(e Entry) {
	x.subMu.Lock()
	defer x.subMu.Unlock()
	for s := range x.subs {
		select {
		case s.ch <- e:
		default: // full: this one loses the update
		}
	}
}

// ChangedSince returns the entries of route ("" = every route) changed by
// a message of the events stream after sequence after, in the order of
// their changes, and through, the greatest sequence the index had applied
// to an entry then: a live list that lost its connection after after is
// current again with them, and an update broadcast with an Entry.Stream
// at most through is already among them. Each job is there once, as it
// is now (not every change it went through); only those v sees. When more than limit
// changed, ok is false and changed nil: the client reloads instead. A job
// forgotten since (MaxJobs) is not there.
func (x *Index) ChangedSince(after uint64, route string, v tenant.Viewer, limit int) (changed []Entry, through uint64, ok bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, it := range x.jobs {
		if it.e.Stream <= after || route != "" && it.e.Route != route || !v.SeesApp(it.e.App) {
			continue
		}
		if len(changed) == limit {
			return nil, x.latest, false
		}
		changed = append(changed, it.e)
	}
	slices.SortFunc(changed, func(a, b Entry) int { return cmp.Compare(a.Stream, b.Stream) })
	return changed, x.latest, true
}
