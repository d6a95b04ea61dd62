package schedule_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

func TestJitterStaysWithinItsSpread(t *testing.T) {
	t.Parallel()
	rnd := schedule.NewRand(1)
	lo, hi := time.Hour, time.Duration(0)
	for range 10_000 {
		d := schedule.Jitter(time.Second, 0.2, rnd)
		lo, hi = min(lo, d), max(hi, d)
	}
	require.GreaterOrEqual(t, lo, 800*time.Millisecond)
	require.LessOrEqual(t, hi, 1200*time.Millisecond)
	// Spread, not a constant: both ends are reached.
	require.Less(t, lo, 820*time.Millisecond)
	require.Greater(t, hi, 1180*time.Millisecond)
}

func TestSpreadCoversItsRange(t *testing.T) {
	t.Parallel()
	rnd := schedule.NewRand(2)
	require.Zero(t, schedule.Spread(0, rnd))
	require.Zero(t, schedule.Spread(-time.Second, rnd))
	var low, high bool
	for range 10_000 {
		d := schedule.Spread(time.Second, rnd)
		require.GreaterOrEqual(t, d, time.Duration(0))
		require.Less(t, d, time.Second)
		low = low || d < 100*time.Millisecond
		high = high || d > 900*time.Millisecond
	}
	require.True(t, low && high, "spread over the whole range")
}

func TestBackoffDoublesUpToItsMax(t *testing.T) {
	t.Parallel()
	b := schedule.Backoff{Base: 250 * time.Millisecond, Max: 5 * time.Second}
	for n, want := range map[int]time.Duration{
		-1: 250 * time.Millisecond, 0: 250 * time.Millisecond, 1: 250 * time.Millisecond,
		2: 500 * time.Millisecond, 3: time.Second, 5: 4 * time.Second, 6: 5 * time.Second, 1000: 5 * time.Second,
	} {
		require.Equal(t, want, b.Delay(n), "failure %d", n)
	}
	rnd := schedule.NewRand(3)
	for range 1000 {
		d := b.Next(3, rnd)
		require.GreaterOrEqual(t, d, 800*time.Millisecond)
		require.LessOrEqual(t, d, 1200*time.Millisecond)
	}
}

// NewRand's source may be drawn from by many goroutines at once (the race
// detector would see a plain PCG's state written concurrently).
func TestNewRandIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	rnd := schedule.NewRand(0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				_ = schedule.Jitter(time.Second, 0.2, rnd)
			}
		})
	}
	wg.Wait()
}
