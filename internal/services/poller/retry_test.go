package poller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

// TestRetryDelayFollowsTheOutage: the wait after our own failure grows with
// how long failures have lasted in this process, not with how often the
// check was delivered, and starts small again after a success.
func TestRetryDelayFollowsTheOutage(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := &Service{cfg: Config{Now: func() time.Time { return now }}, rnd: schedule.NewRand(1)}
	within := func(d, want time.Duration) {
		t.Helper()
		require.GreaterOrEqual(t, d, time.Duration(float64(want)*0.8))
		require.LessOrEqual(t, d, time.Duration(float64(want)*1.2))
	}

	within(s.retryDelay(), retryBackoff.min) // the first failure of a run
	now = now.Add(4 * time.Second)
	within(s.retryDelay(), 4*time.Second) // four seconds into it
	now = now.Add(10 * time.Minute)
	within(s.retryDelay(), retryBackoff.max) // capped

	s.succeeded()
	now = now.Add(time.Hour)
	within(s.retryDelay(), retryBackoff.min) // a new run starts small
}
