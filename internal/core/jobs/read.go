package jobs

import (
	"context"
	"time"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// The readers' verbs: the front door, the CLI, reports and tests read a
// job's record (Get), every record (Each) and its check (Check); none of
// them writes. The services see the owner through their views (views.go).

// Namespace returns the namespace the owner works in.
func (o *Owner) Namespace() events.Namespace { return o.ns }

// Get returns job id's record, or state.ErrNotFound.
func (o *Owner) Get(ctx context.Context, id string) (*state.Job, error) {
	r, err := o.store.get(ctx, id)
	return r.Job, err
}

// Each calls fn for every job record, in no particular order, until fn
// returns an error; a record that does not decode is passed as fn's error.
func (o *Owner) Each(ctx context.Context, fn func(*state.Job, error) error) error {
	return o.store.each(ctx, fn)
}

// CheckView is a job's check message as it stands, for operators and
// tests.
type CheckView struct {
	// Check is the message (nil when it does not decode); Seq its stream
	// sequence, 0 when the job has no check; Published when it was
	// published.
	Check     *events.Check
	Seq       uint64
	Published time.Time
	// Parked: the check waits parked until shortly before its due time
	// (events.Namespace.Parked).
	Parked bool
}

// Check returns job id's check message on route.
func (o *Owner) Check(ctx context.Context, route, id string) (CheckView, error) {
	s, err := o.currentCheck(ctx, route, id)
	return CheckView{Check: s.check, Seq: s.seq, Published: s.published, Parked: s.parked}, err
}
