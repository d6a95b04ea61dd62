package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/natstest"
)

// Every state change of a job is one write of its record, and its
// creation one more: nothing writes a record again to clear its outbox or
// to count its polls.
func TestOneWritePerChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, _ := natstest.Connect(t, natstest.Server(t))
	const n = 40
	w, err := countWrites(ctx, nc, n)
	require.NoError(t, err)
	require.Positive(t, w.exact, "jobs went queued → running → succeeded")
	require.GreaterOrEqual(t, w.changes, 2*n, "every job changed state at least twice")
	require.Equal(t, n+w.changes, w.writes, "one write for each job's creation and one for each change")
}
