package jobs

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/state"
)

func setupStore(t *testing.T) (*records, jetstream.KeyValue, jetstream.JetStream) {
	t.Helper()
	_, _, js := natstest.JetStream(t)
	kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "jobs", History: 2})
	require.NoError(t, err)
	return &records{kv: kv, js: js, now: time.Now}, kv, js
}

func TestStoreCreateGetUpdate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, _ := setupStore(t)

	r, err := s.create(ctx, &state.Job{ID: "job-1", Route: "r", Model: "m", State: state.Pending, CreatedAt: time.Now().UTC()})
	require.NoError(t, err)
	_, err = s.create(ctx, &state.Job{ID: "job-1", State: state.Pending})
	require.ErrorIs(t, err, state.ErrExists)

	got, err := s.get(ctx, "job-1")
	require.NoError(t, err)
	require.Equal(t, r.rev, got.rev)
	require.Equal(t, "m", got.Model)

	got.State = state.Queued
	next, err := s.update(ctx, got, nil)
	require.NoError(t, err)
	require.Greater(t, next.rev, got.rev)
	_, err = s.update(ctx, got, nil)
	require.ErrorIs(t, err, state.ErrConflict, "stale revision")

	_, err = s.get(ctx, "nope")
	require.ErrorIs(t, err, state.ErrNotFound)
	_, err = s.get(ctx, "bad key!")
	require.ErrorIs(t, err, state.ErrNotFound)
	require.ErrorContains(t, err, "is not a valid job id", "an invalid id says so, not only \"not found\"")
}

func TestStoreGetCorruptRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, kv, _ := setupStore(t)
	_, err := kv.Put(ctx, "junk", []byte("not json"))
	require.NoError(t, err)
	_, err = s.get(ctx, "junk")
	require.ErrorContains(t, err, "decode job record")
	require.NotErrorIs(t, err, state.ErrNotFound)
}

func TestStoreMutateConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, _ := setupStore(t)
	s.conflicts = 100
	_, err := s.create(ctx, &state.Job{ID: "hot", State: state.Running})
	require.NoError(t, err)

	const writers, each = 8, 10
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				_, err := s.mutate(ctx, "hot", Record{}, func(j *state.Job) error {
					j.Polls++
					return nil
				})
				require.NoError(t, err)
			}
		})
	}
	wg.Wait()
	j, err := s.get(ctx, "hot")
	require.NoError(t, err)
	require.Equal(t, writers*each, j.Polls, "no lost update under contention")
}

// A mutation that starts from a record in hand writes without reading when
// nobody wrote meanwhile, and reads afresh when someone did; the record
// handed in is never changed.
func TestStoreMutateFromARecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, kv, _ := setupStore(t)
	r, err := s.create(ctx, &state.Job{ID: "j", State: state.Queued})
	require.NoError(t, err)
	next, err := s.mutate(ctx, "j", r, func(j *state.Job) error { j.Polls = 1; return nil })
	require.NoError(t, err)
	require.Equal(t, 0, r.Polls, "the record handed in stays as it was")
	require.Equal(t, 1, next.Polls)

	_, err = kv.Put(ctx, "j", []byte(`{"id":"j","state":"running","polls":7}`))
	require.NoError(t, err)
	calls := 0
	next, err = s.mutate(ctx, "j", next, func(j *state.Job) error { calls++; j.Polls++; return nil })
	require.NoError(t, err)
	require.Equal(t, 2, calls, "a conflict, then a fresh read")
	require.Equal(t, 8, next.Polls)
	require.Equal(t, state.Running, next.State)
}

func TestStoreMutateNoWriteAndBoundedRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, kv, _ := setupStore(t)
	_, err := s.create(ctx, &state.Job{ID: "j", State: state.Queued})
	require.NoError(t, err)

	r, err := s.mutate(ctx, "j", Record{}, func(*state.Job) error { return errNoWrite })
	require.NoError(t, err)
	e, err := kv.Get(ctx, "j")
	require.NoError(t, err)
	require.Equal(t, e.Revision(), r.rev, "nothing written")

	calls := 0
	_, err = s.mutate(ctx, "j", Record{}, func(j *state.Job) error {
		calls++
		// Someone else writes between our read and our write, every time.
		_, perr := kv.Put(ctx, "j", []byte(`{"id":"j","state":"queued"}`))
		require.NoError(t, perr)
		j.Polls++
		return nil
	})
	require.ErrorIs(t, err, state.ErrConflict)
	require.Equal(t, maxConflicts, calls)
}

func TestStoreEach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, kv, _ := setupStore(t)
	for _, id := range []string{"a", "b", "c"} {
		_, err := s.create(ctx, &state.Job{ID: id, State: state.Queued})
		require.NoError(t, err)
	}
	_, err := kv.Put(ctx, "broken", []byte("{"))
	require.NoError(t, err)
	seen, bad := map[string]bool{}, 0
	require.NoError(t, s.each(ctx, func(j *state.Job, err error) error {
		if err != nil {
			bad++
			return nil
		}
		seen[j.ID] = true
		return nil
	}))
	require.Equal(t, map[string]bool{"a": true, "b": true, "c": true}, seen)
	require.Equal(t, 1, bad)

	empty, _, _ := setupStore(t)
	require.NoError(t, empty.each(ctx, func(*state.Job, error) error { t.Fatal("no jobs"); return nil }))
}

// lagging is a bucket read through a replica that has not caught up: it
// has none of the keys.
type lagging struct{ jetstream.KeyValue }

func (lagging) Get(context.Context, string) (jetstream.KeyValueEntry, error) {
	return nil, jetstream.ErrKeyNotFound
}

// A replica's "not found" is not the truth: the leader is asked, and has
// the job; a job the leader has not, or has deleted, is not found.
func TestNotFoundIsConfirmedByTheLeader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, kv, js := setupStore(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, id := range []string{"live", "deleted", "purged"} {
		_, err := s.create(ctx, &state.Job{ID: id, Route: "r", State: state.Running, CreatedAt: now})
		require.NoError(t, err)
	}
	r, err := s.mutate(ctx, "live", Record{}, func(j *state.Job) error { j.Polls = 3; return nil })
	require.NoError(t, err)
	require.NoError(t, kv.Delete(ctx, "deleted"))
	require.NoError(t, kv.Purge(ctx, "purged"))

	lag := &records{kv: lagging{kv}, js: js, now: time.Now}
	got, err := lag.get(ctx, "live")
	require.NoError(t, err)
	require.Equal(t, r.rev, got.rev, "the leader's latest revision")
	require.Equal(t, 3, got.Polls)
	require.Equal(t, now, got.CreatedAt)
	for _, id := range []string{"deleted", "purged", "never"} {
		_, err = lag.get(ctx, id)
		require.ErrorIs(t, err, state.ErrNotFound, id)
	}
	// mutate goes through get: a lagging replica does not make it fail.
	got, err = lag.mutate(ctx, "live", Record{}, func(j *state.Job) error { j.Polls++; return nil })
	require.NoError(t, err)
	require.Equal(t, 4, got.Polls)
}
