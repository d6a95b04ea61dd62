package index

import (
	"context"
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
