package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultMaxRetries bounds Mutate's read-modify-write attempts.
const DefaultMaxRetries = 10

// Store keeps job records in a JetStream KV bucket, one key per job id.
type Store struct {
	kv jetstream.KeyValue
	js jetstream.JetStream // set: a "not found" is confirmed by the leader
	// MaxRetries bounds Mutate's attempts on conflict (default
	// DefaultMaxRetries).
	MaxRetries int
	// Now stamps UpdatedAt (default time.Now).
	Now func() time.Time
}

// NewStore returns a Store over the given bucket.
func NewStore(kv jetstream.KeyValue) *Store {
	return &Store{kv: kv, MaxRetries: DefaultMaxRetries, Now: time.Now}
}

// Bucket returns the underlying KV bucket.
func (s *Store) Bucket() jetstream.KeyValue { return s.kv }

// Create stores a new job and returns its revision, or ErrExists when a job
// with that id exists.
func (s *Store) Create(ctx context.Context, j *Job) (uint64, error) {
	b, err := s.encode(j)
	if err != nil {
		return 0, err
	}
	rev, err := s.kv.Create(ctx, j.ID, b)
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		return 0, fmt.Errorf("create job %s: %w", j.ID, ErrExists)
	case err != nil:
		return 0, fmt.Errorf("create job %s: %w", j.ID, err)
	}
	return rev, nil
}

// Get returns the job and its revision, or ErrNotFound (see
// ConfirmNotFound for clustered buckets).
func (s *Store) Get(ctx context.Context, id string) (*Job, uint64, error) {
	e, err := s.kv.Get(ctx, id)
	switch {
	case (errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)) && s.js != nil:
		// Perhaps a replica behind the others: the leader decides.
		j, rev, found, err := s.leaderGet(ctx, id)
		switch {
		case err != nil:
			return nil, 0, err
		case !found:
			return nil, 0, fmt.Errorf("get job %s: %w", id, ErrNotFound)
		}
		return j, rev, nil
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return nil, 0, fmt.Errorf("get job %s: %w", id, ErrNotFound)
	case errors.Is(err, jetstream.ErrInvalidKey):
		return nil, 0, fmt.Errorf("get job %q: invalid id: %w", id, ErrNotFound)
	case err != nil:
		return nil, 0, fmt.Errorf("get job %s: %w", id, err)
	}
	j, err := Decode(e.Value())
	if err != nil {
		return nil, 0, fmt.Errorf("get job %s (revision %d): %w", id, e.Revision(), err)
	}
	return j, e.Revision(), nil
}

// Update writes the job if its latest revision is still rev, and returns the
// new revision, or ErrConflict.
func (s *Store) Update(ctx context.Context, j *Job, rev uint64) (uint64, error) {
	b, err := s.encode(j)
	if err != nil {
		return 0, err
	}
	nrev, err := s.kv.Update(ctx, j.ID, b, rev)
	switch {
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return 0, fmt.Errorf("update job %s at revision %d: %w", j.ID, rev, ErrConflict)
	case err != nil:
		return 0, fmt.Errorf("update job %s: %w", j.ID, err)
	}
	return nrev, nil
}

// Mutate reads the job, applies fn and writes the result on the revision it
// read, retrying from a fresh read on conflict up to MaxRetries times. When
// fn returns ErrNoChange nothing is written and Mutate returns the job as
// read. Any other error from fn is returned as is.
func (s *Store) Mutate(ctx context.Context, id string, fn func(*Job) error) (*Job, uint64, error) {
	return s.mutate(ctx, id, nil, 0, fn)
}

// MutateFrom is Mutate starting from a record the caller read at revision
// rev, which saves the first read: fn runs on j itself first (j must not be
// used afterwards), and on a fresh copy after a conflict.
func (s *Store) MutateFrom(ctx context.Context, j *Job, rev uint64, fn func(*Job) error) (*Job, uint64, error) {
	return s.mutate(ctx, j.ID, j, rev, fn)
}

func (s *Store) mutate(ctx context.Context, id string, j *Job, rev uint64, fn func(*Job) error) (*Job, uint64, error) {
	retries := s.MaxRetries
	if retries <= 0 {
		retries = DefaultMaxRetries
	}
	// floor is the oldest revision a read may return: after a conflict on
	// revision r the job is newer than r, and a read of r or older came
	// from a replica that has not caught up (reads are served by any
	// replica of a clustered bucket). Deciding on it could skip a needed
	// write (ErrNoChange) or lose the race again.
	var floor uint64
	for range retries {
		if j == nil || rev == 0 {
			var err error
			if j, rev, err = s.getFresh(ctx, id, floor); err != nil {
				return nil, 0, err
			}
		}
		switch err := fn(j); {
		case errors.Is(err, ErrNoChange):
			return j, rev, nil
		case err != nil:
			return nil, 0, err
		}
		nrev, err := s.Update(ctx, j, rev)
		if errors.Is(err, ErrConflict) {
			floor = max(floor, rev+1)
			j = nil
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		return j, nrev, nil
	}
	return nil, 0, fmt.Errorf("update job %s: %d conflicting writes in a row: %w", id, retries, ErrConflict)
}

// getFresh reads the job, reading again (for up to staleFor) while a
// replica answers with a revision older than floor.
func (s *Store) getFresh(ctx context.Context, id string, floor uint64) (*Job, uint64, error) {
	deadline := time.Now().Add(staleFor)
	for {
		j, rev, err := s.Get(ctx, id)
		if err != nil || rev >= floor || time.Now().After(deadline) {
			return j, rev, err
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// staleFor bounds how long getFresh waits for a replica to catch up.
const staleFor = 2 * time.Second

// Each calls fn for every job in the bucket, in no particular order, and
// stops at the first error fn returns. Records that do not decode are
// reported through fn's second argument rather than stopping the walk.
func (s *Store) Each(ctx context.Context, fn func(*Job, error) error) error {
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
				return fmt.Errorf("list jobs: watcher closed")
			}
			if e == nil {
				return nil // caught up with the bucket's current contents
			}
			j, derr := Decode(e.Value())
			if derr != nil {
				derr = fmt.Errorf("job %s (revision %d): %w", e.Key(), e.Revision(), derr)
			}
			if err := fn(j, derr); err != nil {
				return err
			}
		}
	}
}

func (s *Store) encode(j *Job) ([]byte, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	j.UpdatedAt = now().UTC()
	b, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("encode job %s: %w", j.ID, err)
	}
	return b, nil
}

// Decode parses a stored job record.
func Decode(b []byte) (*Job, error) {
	var j Job
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("decode job record: %w", err)
	}
	if j.ID == "" {
		return nil, errors.New("decode job record: no id")
	}
	if !j.State.Valid() {
		return nil, fmt.Errorf("decode job record %s: state %q: %w", j.ID, j.State, ErrInvalidState)
	}
	return &j, nil
}
