package report_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/report"
)

// A fixed poller sees a job of duration d after ceil(d/f) polls, that much
// late; the matched interval gives back the mean delay asked for.
func TestFixedInterval(t *testing.T) {
	t.Parallel()
	polls, delay := report.FixedPolls([]float64{1, 2.5}, 1)
	require.InDelta(t, 2, polls, 1e-9)    // 1 and 3 polls
	require.InDelta(t, 0.25, delay, 1e-9) // 0 and 0.5 s late
	polls, delay = report.FixedPolls(nil, 1)
	require.Zero(t, polls)
	require.Zero(t, delay)

	durations := []float64{3.1, 4.7, 8.2, 12.5, 20.3, 33.3}
	interval, polls := report.MatchFixed(durations, 1.5)
	p, d := report.FixedPolls(durations, interval)
	require.InDelta(t, 1.5, d, 0.05)
	require.Equal(t, p, polls)
	sdk, _ := report.FixedPolls(durations, report.SDKInterval.Seconds())
	require.Greater(t, sdk, polls, "a shorter interval polls more")
}
