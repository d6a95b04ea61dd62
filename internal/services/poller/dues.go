package poller

import (
	"sync"
	"time"
)

// dues remembers, for each check this process sent back with a delay, when
// that check is due and when the poll that sent it back was made: a check
// carrying its job's poll state cannot say either, and both are needed
// at its next delivery (the lateness metric; the previous poll time that
// dates a completion the provider does not date). With several processes
// a check usually comes back to another one, which then goes without
// (lateness is then observed on the deliveries that come back here).
type dues struct {
	mu    sync.Mutex
	m     map[uint64]entry
	swept int64
}

// due is what take returns.
type due struct {
	polled time.Time // zero: the check was only armed
	due    time.Time
}

// entry is a due in Unix nanoseconds, and the delivery it is for.
type entry struct {
	polled, due int64
	delivery    uint64
}

// duesKept bounds how long an entry is kept past its due time: a check
// that went to another process, or was replaced, is not taken here.
const duesKept = 10 * time.Minute

// put records that the check at stream sequence seq, now at its delivery
// number delivered, was sent back to be due at at, from a poll made at
// polled (zero: it was only armed).
func (d *dues) put(seq, delivered uint64, polled, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[uint64]entry{}
	}
	e := entry{due: at.UnixNano(), delivery: delivered + 1}
	if !polled.IsZero() {
		e.polled = polled.UnixNano()
	}
	d.m[seq] = e
	if e.due-d.swept > int64(time.Minute) {
		d.swept = e.due
		for k, v := range d.m {
			if e.due-v.due > int64(duesKept) {
				delete(d.m, k)
			}
		}
	}
}

// take returns and forgets what was put for seq, if it was put by the
// delivery before this one (delivered): when another process handled that
// one, or a process died holding it, what this process knows is older.
func (d *dues) take(seq, delivered uint64) (due, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.m[seq]
	if !ok {
		return due{}, false
	}
	delete(d.m, seq)
	if e.delivery != delivered {
		return due{}, false
	}
	v := due{due: time.Unix(0, e.due).UTC()}
	if e.polled != 0 {
		v.polled = time.Unix(0, e.polled).UTC()
	}
	return v, true
}
