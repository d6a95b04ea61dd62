package learn

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A queue's old observations weigh half after queueHalfLife, so its rate
// follows a provider whose queue speeds up or slows down.
func TestQueueObservationsDecay(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	q := QueueRecord{Moved: 10, Seconds: 100, UpdatedAt: t0}
	aged := q.decayed(t0.Add(queueHalfLife))
	require.InDelta(t, 5, aged.Moved, 1e-9)
	require.InDelta(t, 50, aged.Seconds, 1e-9)
	require.Equal(t, t0.Add(queueHalfLife), aged.UpdatedAt)
	require.InDelta(t, 0.1, aged.Rate(), 1e-9, "decay keeps the rate; new observations then weigh more")
	aged.Moved += 50
	aged.Seconds += 50
	require.InDelta(t, 0.55, aged.Rate(), 1e-9)
	require.Zero(t, QueueRecord{Moved: 1, Seconds: 10}.Rate(), "too little observation")
}
