package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/state"
)

// records keeps job records in the jobs bucket, one key per job id: Create
// for first writes (the id is the deduplication key), Get, and Update on a
// revision. NATS errors end here, translated into state.ErrNotFound,
// state.ErrExists and state.ErrConflict.
type records struct {
	kv jetstream.KeyValue
	js jetstream.JetStream // a replica's "not found" is confirmed by the leader
	// now stamps UpdatedAt.
	now func() time.Time
	// conflicts bounds mutate's attempts (0: maxConflicts).
	conflicts int
	// release frees the running slots of a job whose end was just written
	// (nil: nobody takes slots).
	release func(ctx context.Context, id string, slots []state.Slot)
}

// Record is a job's record as the owner last read or wrote it. Services
// hold it between two decisions on the same job and hand it back, so that
// the next write needs no read when nobody wrote the job meanwhile (the
// revision it was read at stays with the owner).
type Record struct {
	*state.Job
	rev uint64
}

func (s *records) create(ctx context.Context, j *state.Job) (Record, error) {
	b, err := s.encode(j)
	if err != nil {
		return Record{}, err
	}
	rev, err := s.kv.Create(ctx, j.ID, b)
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		return Record{}, fmt.Errorf("create job %s: %w", j.ID, state.ErrExists)
	case err != nil:
		return Record{}, fmt.Errorf("create job %s: %w", j.ID, err)
	}
	return Record{Job: j, rev: rev}, nil
}

// get reads a job, or reports state.ErrNotFound once the bucket's leader
// agrees (see leaderGet).
func (s *records) get(ctx context.Context, id string) (Record, error) {
	e, err := s.kv.Get(ctx, id)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		// Perhaps a replica behind the others: the leader decides.
		j, rev, found, err := s.leaderGet(ctx, id)
		switch {
		case err != nil:
			return Record{}, err
		case !found:
			return Record{}, fmt.Errorf("get job %s: %w", id, state.ErrNotFound)
		}
		return Record{Job: j, rev: rev}, nil
	case errors.Is(err, jetstream.ErrInvalidKey):
		// No job can have this id: not found, and the message says why.
		return Record{}, fmt.Errorf("get job %q: %w (%q is not a valid job id: [A-Za-z0-9_-], at most 128 bytes)", id, state.ErrNotFound, id)
	case err != nil:
		return Record{}, fmt.Errorf("get job %s: %w", id, err)
	}
	j, err := state.Decode(e.Value())
	if err != nil {
		return Record{}, fmt.Errorf("get job %s (revision %d): %w", id, e.Revision(), err)
	}
	return Record{Job: j, rev: e.Revision()}, nil
}

// update writes r's job if its latest revision is still r's, and returns
// it at its new revision, or state.ErrConflict. had are the running slots
// the job held at that revision.
//
// A write that ends a job holding running slots clears them, and once a
// write that drops slots from the record has landed (an end, a job put
// back to wait for a slot) they are freed: every end of every job passes
// here, whoever saw it, and frees the slots once. A process that dies in
// between leaves them to budget.Running.Repair.
//
// A job canceled on request with a reason keeps the request's reason as
// its own (the provider's "canceled at ..." says nothing the state does
// not): whichever write ends it — the cancel call's answer, a poll, a
// webhook, a withdrawal before the create — passes here, and its events,
// encoded from the record after this write, carry it.
func (s *records) update(ctx context.Context, r Record, had []state.Slot) (Record, error) {
	if r.State.Terminal() {
		r.Slots = nil
	}
	if r.State == state.Canceled && !r.CancelRequestedAt.IsZero() && r.CancelReason != "" {
		r.Reason = r.CancelReason
	}
	b, err := s.encode(r.Job)
	if err != nil {
		return Record{}, err
	}
	rev, err := s.kv.Update(ctx, r.ID, b, r.rev)
	switch {
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return Record{}, fmt.Errorf("update job %s at revision %d: %w", r.ID, r.rev, state.ErrConflict)
	case err != nil:
		return Record{}, fmt.Errorf("update job %s: %w", r.ID, err)
	}
	dropped := slices.DeleteFunc(slices.Clone(had), func(sl state.Slot) bool { return slices.Contains(r.Slots, sl) })
	if len(dropped) > 0 && s.release != nil {
		s.release(ctx, r.ID, dropped)
	}
	return Record{Job: r.Job, rev: rev}, nil
}

// maxConflicts bounds mutate's read-modify-write attempts.
const maxConflicts = 10

// mutate applies fn to the job and writes the result on the revision it
// was read at, from a fresh read after each conflict, up to maxConflicts
// times. It starts from from when from holds a job (saving a read; fn
// runs on a copy). When fn returns errNoWrite nothing is written and
// mutate returns the job as read; any other error from fn is returned as
// is.
func (s *records) mutate(ctx context.Context, id string, from Record, fn func(*state.Job) error) (Record, error) {
	// floor is the oldest revision a read may return: after a conflict on
	// revision r the job is newer than r, and a read of r or older came
	// from a replica that has not caught up (reads are served by any
	// replica of a clustered bucket). Deciding on it could skip a needed
	// write or lose the race again.
	var floor uint64
	cur := from
	tries := cmp.Or(s.conflicts, maxConflicts)
	for range tries {
		if cur.Job == nil {
			var err error
			if cur, err = s.fresh(ctx, id, floor); err != nil {
				return Record{}, err
			}
		} else {
			cur = Record{Job: cloneJob(cur.Job), rev: cur.rev}
		}
		had := slices.Clone(cur.Slots)
		switch err := fn(cur.Job); {
		case errors.Is(err, errNoWrite):
			return cur, nil
		case err != nil:
			return Record{}, err
		}
		next, err := s.update(ctx, cur, had)
		if errors.Is(err, state.ErrConflict) {
			floor = max(floor, cur.rev+1)
			cur = Record{}
			continue
		}
		if err != nil {
			return Record{}, err
		}
		return next, nil
	}
	return Record{}, fmt.Errorf("update job %s: %d conflicting writes in a row: %w", id, tries, state.ErrConflict)
}

// errNoWrite, returned by a mutate function, skips the write.
var errNoWrite = errors.New("no write needed")

// fresh reads the job, reading again (for up to staleFor) while a replica
// answers with a revision older than floor.
func (s *records) fresh(ctx context.Context, id string, floor uint64) (Record, error) {
	deadline := time.Now().Add(staleFor)
	for {
		r, err := s.get(ctx, id)
		if err != nil || r.rev >= floor || time.Now().After(deadline) {
			return r, err
		}
		select {
		case <-ctx.Done():
			return Record{}, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// staleFor bounds how long fresh waits for a replica to catch up.
const staleFor = 2 * time.Second

// each calls fn for every job in the bucket, in no particular order, and
// stops at the first error fn returns. Records that do not decode are
// reported through fn's second argument rather than stopping the walk.
func (s *records) each(ctx context.Context, fn func(*state.Job, error) error) error {
	w, err := s.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("list jobs: %w", err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("list jobs: watcher closed")
			}
			if e == nil {
				return nil // caught up with the bucket's current contents
			}
			j, derr := state.Decode(e.Value())
			if derr != nil {
				derr = fmt.Errorf("job %s (revision %d): %w", e.Key(), e.Revision(), derr)
			}
			if err := fn(j, derr); err != nil {
				return err
			}
		}
	}
}

func (s *records) encode(j *state.Job) ([]byte, error) {
	j.UpdatedAt = s.now().UTC()
	b, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("encode job %s: %w", j.ID, err)
	}
	return b, nil
}

// cloneJob copies a job deeply enough that a mutate function changing the
// copy leaves the original as it was.
func cloneJob(j *state.Job) *state.Job {
	c := *j
	c.Outbox = append([]state.OutboxEvent(nil), j.Outbox...)
	c.Deliveries = append([]string(nil), j.Deliveries...)
	c.Outputs = append([]string(nil), j.Outputs...)
	c.Slots = append([]state.Slot(nil), j.Slots...)
	return &c
}
