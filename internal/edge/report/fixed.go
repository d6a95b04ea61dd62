package report

import (
	"math"
	"time"
)

// SDKInterval is the fixed poll interval of a provider SDK's default wait
// (the Replicate SDK polls every 0.5 s), in model time: what `pollux dev`
// and the front door's model figures compare Pollux with.
const SDKInterval = 500 * time.Millisecond

// FixedPolls is what a poller at a fixed interval (seconds) costs on jobs of
// the given durations (seconds): polls per job and mean detection delay.
// It sees a job of duration d after ceil(d/f) polls, ceil(d/f)·f − d late.
func FixedPolls(durations []float64, interval float64) (polls, delay float64) {
	if len(durations) == 0 || interval <= 0 {
		return 0, 0
	}
	for _, d := range durations {
		n := math.Ceil(d / interval)
		polls += n
		delay += n*interval - d
	}
	return polls / float64(len(durations)), delay / float64(len(durations))
}

// MatchFixed returns the fixed interval (seconds) at which a poller has
// meanDelay on jobs of the given durations, and its polls per job: the
// fixed-interval poller as good as a schedule whose mean delay is meanDelay.
func MatchFixed(durations []float64, meanDelay float64) (interval, polls float64) {
	// The mean delay grows with the interval: bisect on a log scale.
	lo, hi := 1e-4, 1e4
	for range 100 {
		mid := math.Sqrt(lo * hi)
		if _, d := FixedPolls(durations, mid); d < meanDelay {
			lo = mid
		} else {
			hi = mid
		}
	}
	polls, _ = FixedPolls(durations, lo)
	return lo, polls
}
