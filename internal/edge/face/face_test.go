package face_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/face/facetest"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/pkg/state"
)

// The configuration accepts exactly the faces there are.
func TestConfigNamesEveryFace(t *testing.T) {
	var kinds []string
	for _, k := range face.Kinds {
		kinds = append(kinds, string(k))
		require.True(t, k.Valid())
	}
	require.Equal(t, kinds, config.FaceKinds)
	require.False(t, face.Kind("runway").Valid())
}

// A key makes the same id on the same route and face, another id
// elsewhere; no key, a new id each time.
func TestIDBytes(t *testing.T) {
	a := face.IDBytes(face.Replicate, "sim", "k", 16)
	require.Equal(t, a, face.IDBytes(face.Replicate, "sim", "k", 16))
	require.NotEqual(t, a, face.IDBytes(face.Replicate, "other", "k", 16), "the route is part of the id")
	require.NotEqual(t, a, face.IDBytes(face.Fal, "sim", "k", 16), "the face is part of the id")
	require.NotEqual(t, a, face.IDBytes(face.Replicate, "sim", "k2", 16))
	require.NotEqual(t, face.IDBytes(face.Replicate, "sim", "", 16), face.IDBytes(face.Replicate, "sim", "", 16))
}

func TestIdempotencyKeyIsBounded(t *testing.T) {
	r, _ := http.NewRequest(http.MethodPost, "/", nil)
	key, e := face.IdempotencyKey(r)
	require.Nil(t, e)
	require.Empty(t, key)
	r.Header.Set("Idempotency-Key", "order-42")
	key, e = face.IdempotencyKey(r)
	require.Nil(t, e)
	require.Equal(t, "order-42", key)
	r.Header.Set("Idempotency-Key", strings.Repeat("k", 257))
	_, e = face.IdempotencyKey(r)
	require.NotNil(t, e)
	require.Equal(t, http.StatusBadRequest, e.Status)
	require.Equal(t, "Idempotency-Key", e.Field)
}

// PollAfter is Pollux's own next check, bounded; nothing once the job
// has ended.
func TestPollAfter(t *testing.T) {
	now := time.Now()
	j := &state.Job{State: state.Running, NextCheckAt: now.Add(3 * time.Second)}
	require.Equal(t, 3*time.Second, face.PollAfter(j, now, time.Second, 10*time.Second))
	j.NextCheckAt = now.Add(time.Minute)
	require.Equal(t, 10*time.Second, face.PollAfter(j, now, time.Second, 10*time.Second))
	j.NextCheckAt = now.Add(-time.Minute)
	require.Equal(t, time.Second, face.PollAfter(j, now, time.Second, 10*time.Second))
	j.State = state.Succeeded
	require.Zero(t, face.PollAfter(j, now, time.Second, 10*time.Second))
	require.Equal(t, time.Second, face.PollAfter(nil, now, time.Second, 10*time.Second))
}

// Record waits the mount's grace for a record that does not exist yet:
// one that comes meanwhile is read, and none is state.ErrNotFound once
// the grace is over.
func TestRecordWaitsForARecordToCome(t *testing.T) {
	t.Parallel()
	p := facetest.New()
	m := face.Mount{Kind: face.Replicate, Route: "sim", RecordGrace: time.Minute}
	got := make(chan *state.Job, 1)
	go func() {
		j, err := m.Record(t.Context(), p, "late")
		if err != nil {
			j = nil
		}
		got <- j
	}()
	select {
	case w := <-p.Waits():
		require.Equal(t, "late", w)
	case j := <-got:
		t.Fatalf("returned %v without waiting for the record", j)
	}
	p.Put(&state.Job{ID: "late", Route: "sim", State: state.Pending})
	select {
	case j := <-got:
		require.NotNil(t, j)
		require.Equal(t, "late", j.ID)
	case <-time.After(20 * time.Second):
		t.Fatal("the record came and was not read")
	}

	m.RecordGrace = 20 * time.Millisecond
	_, err := m.Record(t.Context(), p, "never")
	require.ErrorIs(t, err, state.ErrNotFound)
}
