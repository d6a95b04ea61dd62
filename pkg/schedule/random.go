package schedule

import (
	"math/rand/v2"
	"sync"
	"time"
)

// The random spreads every Pollux wait is drawn with: the jitter of a
// retry, the spread of a crowd of checks, the exponential backoff of a
// failing call. They live here, next to the poll schedule's own jitter, so
// that a fleet's waits are spread one way everywhere.

// RetryJitter is the spread of a retry's wait: ±20 %.
const RetryJitter = 0.2

// NewRand returns a random source that any number of goroutines may draw
// from at once, seeded with seed (0: a random seed). Policy.Next and the
// functions below take it.
func NewRand(seed uint64) *rand.Rand {
	if seed == 0 {
		seed = rand.Uint64()
	}
	return rand.New(&lockedSource{src: rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)})
}

// lockedSource makes a PCG safe for concurrent use. A *rand.Rand keeps no
// state of its own besides its source, so it is safe when its source is.
type lockedSource struct {
	mu  sync.Mutex
	src *rand.PCG
}

func (s *lockedSource) Uint64() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.src.Uint64()
}

// Jitter returns d scaled by a factor drawn uniformly from [1-f, 1+f].
func Jitter(d time.Duration, f float64, rnd *rand.Rand) time.Duration {
	return time.Duration(float64(d) * (1 + f*(2*rnd.Float64()-1)))
}

// Spread returns a wait drawn uniformly from [0, d): a crowd of waiters
// that would all go at once goes over d instead.
func Spread(d time.Duration, rnd *rand.Rand) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rnd.Int64N(int64(d)))
}

// Backoff is an exponential backoff: the wait after the n-th failure in a
// row is Base·2^(n-1), at most Max, spread by RetryJitter.
type Backoff struct {
	// Base is the wait after the first failure.
	Base time.Duration
	// Max is the longest wait.
	Max time.Duration
}

// Delay is the wait after the n-th failure in a row (n from 1), before
// jitter.
func (b Backoff) Delay(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	return min(doubled(b.Base, n-1), b.Max)
}

// Next is the jittered wait after the n-th failure in a row.
func (b Backoff) Next(n int, rnd *rand.Rand) time.Duration {
	return Jitter(b.Delay(n), RetryJitter, rnd)
}
