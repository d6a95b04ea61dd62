package poller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A due is taken once, only by the delivery right after the one that put
// it, and forgotten a while after it passed.
func TestDues(t *testing.T) {
	var d dues
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

	d.put(7, 3, t0, t0.Add(time.Second))
	v, ok := d.take(7, 4)
	require.True(t, ok)
	require.True(t, t0.Equal(v.polled))
	require.True(t, t0.Add(time.Second).Equal(v.due))
	_, ok = d.take(7, 4)
	require.False(t, ok, "taken once")

	d.put(8, 1, time.Time{}, t0)
	_, ok = d.take(8, 3)
	require.False(t, ok, "delivery 2 went elsewhere: what this process knows is stale")

	d.put(9, 1, time.Time{}, t0)
	v, ok = d.take(9, 2)
	require.True(t, ok)
	require.True(t, v.polled.IsZero(), "an armed check was not polled")

	d.put(10, 1, time.Time{}, t0)
	d.put(11, 1, time.Time{}, t0.Add(duesKept+2*time.Minute)) // sweeps what passed long ago
	_, ok = d.take(10, 2)
	require.False(t, ok)
	_, ok = d.take(11, 2)
	require.True(t, ok)
}
