package state_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/state"
)

// The world's view of a job drops what is Pollux's own, and a finished
// job's next check: none is due.
func TestSnapshot(t *testing.T) {
	next := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	j := &state.Job{ID: "j", State: state.Running, Input: []byte(`{"p":1}`), NextCheckAt: next,
		Outbox: []state.OutboxEvent{{Seq: 1, Type: "queued"}}}
	s := j.Snapshot()
	require.Nil(t, s.Input)
	require.Nil(t, s.Outbox)
	require.Equal(t, next, s.NextCheckAt, "running: its next check is due then")
	require.NotNil(t, j.Input, "a copy")
	j.State = state.Succeeded
	require.True(t, j.Snapshot().NextCheckAt.IsZero(), "finished: no check due")
	require.Equal(t, next, j.NextCheckAt, "the record keeps it")
}
