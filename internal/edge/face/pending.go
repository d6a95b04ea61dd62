package face

import (
	"sync"
	"time"

	"github.com/pollux-dev/pollux/pkg/state"
)

// Bounds of the creates a Kit answered before their record existed.
const (
	// PendingTTL is how long a create answered before its record existed
	// is answered as pending by this process while the record is still
	// missing (a gateway that died holding the submission hands it on
	// after the streams' intake_ack_wait, 60 s by default).
	PendingTTL = 2 * time.Minute
	// maxPending bounds those creates.
	maxPending = 10000
)

// pending are the creates this process answered before their job's
// record existed: a lookup of one is answered from the create until the
// record exists or PendingTTL has passed, so an SDK polling after such an
// answer does not meet a 404. Another process of the fleet does not know
// them.
type pending struct {
	mu sync.Mutex
	by map[string]*state.Job
}

// add remembers job j (its CreatedAt is when it was answered).
func (p *pending) add(j *state.Job, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.by == nil {
		p.by = map[string]*state.Job{}
	}
	if len(p.by) >= maxPending {
		for id, old := range p.by {
			if now.Sub(old.CreatedAt) > PendingTTL {
				delete(p.by, id)
			}
		}
		if len(p.by) >= maxPending {
			return
		}
	}
	p.by[j.ID] = j
}

// get returns the create of id answered within PendingTTL, if any
// (shared: callers do not change it).
func (p *pending) get(id string, now time.Time) *state.Job {
	p.mu.Lock()
	defer p.mu.Unlock()
	j, ok := p.by[id]
	switch {
	case !ok:
		return nil
	case now.Sub(j.CreatedAt) > PendingTTL:
		delete(p.by, id)
		return nil
	}
	return j
}

// has reports whether j is a create get returned (not a record).
func (p *pending) has(j *state.Job) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.by[j.ID] == j
}
