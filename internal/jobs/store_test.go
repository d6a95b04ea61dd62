package state_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/natstest"
	"github.com/pollux-dev/pollux/pkg/state"
)

func setup(t *testing.T) (*state.Store, jetstream.KeyValue) {
	t.Helper()
	_, _, js := natstest.JetStream(t)
	kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "jobs"})
	require.NoError(t, err)
	return state.NewStore(kv), kv
}

func TestStoreCreateGetUpdate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t)

	j := &state.Job{ID: "job-1", Route: "r", Model: "m", State: state.Pending, CreatedAt: time.Now().UTC()}
	rev, err := s.Create(ctx, j)
	require.NoError(t, err)

	_, err = s.Create(ctx, &state.Job{ID: "job-1", State: state.Pending})
	require.ErrorIs(t, err, state.ErrExists)

	got, grev, err := s.Get(ctx, "job-1")
	require.NoError(t, err)
	require.Equal(t, rev, grev)
	require.Equal(t, "m", got.Model)

	got.State = state.Queued
	rev2, err := s.Update(ctx, got, grev)
	require.NoError(t, err)
	require.Greater(t, rev2, grev)

	_, err = s.Update(ctx, got, grev)
	require.ErrorIs(t, err, state.ErrConflict, "stale revision")

	_, _, err = s.Get(ctx, "nope")
	require.ErrorIs(t, err, state.ErrNotFound)
	_, _, err = s.Get(ctx, "bad key!")
	require.ErrorIs(t, err, state.ErrNotFound)
}

func TestStoreGetCorruptRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, kv := setup(t)
	_, err := kv.Put(ctx, "junk", []byte("not json"))
	require.NoError(t, err)
	_, _, err = s.Get(ctx, "junk")
	require.ErrorContains(t, err, "decode job record")
	require.NotErrorIs(t, err, state.ErrNotFound)
}

func TestStoreMutateConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := setup(t)
	s.MaxRetries = 100
	_, err := s.Create(ctx, &state.Job{ID: "hot", State: state.Running})
	require.NoError(t, err)

	const writers, each = 8, 10
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				_, _, err := s.Mutate(ctx, "hot", func(j *state.Job) error {
					j.Polls++
					return nil
				})
				require.NoError(t, err)
			}
		})
	}
	wg.Wait()
	j, _, err := s.Get(ctx, "hot")
	require.NoError(t, err)
	require.Equal(t, writers*each, j.Polls, "no lost update under contention")
}

func TestStoreMutateNoChangeAndBoundedRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, kv := setup(t)
	_, err := s.Create(ctx, &state.Job{ID: "j", State: state.Queued})
	require.NoError(t, err)

	_, rev, err := s.Mutate(ctx, "j", func(*state.Job) error { return state.ErrNoChange })
	require.NoError(t, err)
	e, err := kv.Get(ctx, "j")
	require.NoError(t, err)
	require.Equal(t, e.Revision(), rev, "nothing written")

	s.MaxRetries = 3
	calls := 0
	_, _, err = s.Mutate(ctx, "j", func(j *state.Job) error {
		calls++
		// Someone else writes between our read and our write, every time.
		_, perr := kv.Put(ctx, "j", []byte(`{"id":"j","state":"queued"}`))
		require.NoError(t, perr)
		j.Polls++
		return nil
	})
	require.ErrorIs(t, err, state.ErrConflict)
	require.Equal(t, 3, calls)
}

func TestStoreEach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, kv := setup(t)
	for _, id := range []string{"a", "b", "c"} {
		_, err := s.Create(ctx, &state.Job{ID: id, State: state.Queued})
		require.NoError(t, err)
	}
	_, err := kv.Put(ctx, "broken", []byte("{"))
	require.NoError(t, err)
	seen, bad := map[string]bool{}, 0
	require.NoError(t, s.Each(ctx, func(j *state.Job, err error) error {
		if err != nil {
			bad++
			return nil
		}
		seen[j.ID] = true
		return nil
	}))
	require.Equal(t, map[string]bool{"a": true, "b": true, "c": true}, seen)
	require.Equal(t, 1, bad)

	empty, _ := setup(t)
	require.NoError(t, empty.Each(ctx, func(*state.Job, error) error { t.Fatal("no jobs"); return nil }))
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
	ctx := context.Background()
	_, _, js := natstest.JetStream(t)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "jobs", History: 2})
	require.NoError(t, err)
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, id := range []string{"live", "deleted", "purged"} {
		_, err := state.NewStore(kv).Create(ctx, &state.Job{ID: id, Route: "r", State: state.Running, CreatedAt: now})
		require.NoError(t, err)
	}
	_, rev, err := state.NewStore(kv).Mutate(ctx, "live", func(j *state.Job) error { j.Polls = 3; return nil })
	require.NoError(t, err)
	require.NoError(t, kv.Delete(ctx, "deleted"))
	require.NoError(t, kv.Purge(ctx, "purged"))

	_, _, err = state.NewStore(lagging{kv}).Get(ctx, "live")
	require.ErrorIs(t, err, state.ErrNotFound, "without confirmation a replica's answer stands")

	s := state.NewStore(lagging{kv}).ConfirmNotFound(js)
	j, got, err := s.Get(ctx, "live")
	require.NoError(t, err)
	require.Equal(t, rev, got, "the leader's latest revision")
	require.Equal(t, 3, j.Polls)
	require.Equal(t, now, j.CreatedAt)
	for _, id := range []string{"deleted", "purged", "never"} {
		_, _, err = s.Get(ctx, id)
		require.ErrorIs(t, err, state.ErrNotFound, id)
	}
	// Mutate goes through Get: a lagging replica does not make it fail.
	j, _, err = s.Mutate(ctx, "live", func(j *state.Job) error { j.Polls++; return nil })
	require.NoError(t, err)
	require.Equal(t, 4, j.Polls)
}
