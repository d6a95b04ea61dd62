package budget_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
)

func setup(t *testing.T) (jetstream.JetStream, *events.Resources) {
	t.Helper()
	_, _, js := natstest.JetStream(t)
	res, err := events.Default.Setup(context.Background(), js, events.Options{})
	require.NoError(t, err)
	return js, res
}

func ensure(t *testing.T, js jetstream.JetStream, res *events.Resources, l budget.Limit) *budget.Budget {
	t.Helper()
	b, err := budget.Ensure(context.Background(), js, events.Default, res.Slots, "r", events.SlotStatus, l, events.Options{})
	require.NoError(t, err)
	return b
}

func TestNoLimitIsFree(t *testing.T) {
	t.Parallel()
	js, res := setup(t)
	b := ensure(t, js, res, budget.Limit{})
	require.Nil(t, b)
	l, err := b.Acquire(context.Background())
	require.NoError(t, err)
	l.Release()
}

// Several "processes" (budgets of their own over one consumer) never hold
// more leases than the cap between them.
func TestConcurrencyCapHoldsAcrossProcesses(t *testing.T) {
	t.Parallel()
	js, res := setup(t)
	const capacity, procs, workers, calls = 3, 4, 4, 15
	var inFlight, peak, done atomic.Int32
	var wg sync.WaitGroup
	for range procs {
		b := ensure(t, js, res, budget.Limit{Concurrency: capacity})
		for range workers {
			wg.Go(func() {
				for range calls {
					l, err := b.Acquire(context.Background())
					if err != nil {
						continue
					}
					n := inFlight.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					call(2 * time.Millisecond)
					inFlight.Add(-1)
					done.Add(1)
					l.Release()
				}
			})
		}
	}
	wg.Wait()
	require.LessOrEqual(t, peak.Load(), int32(capacity))
	require.Equal(t, int32(capacity), peak.Load(), "the cap is used")
	require.Positive(t, done.Load())
}

// call stands for a provider call that takes d.
func call(d time.Duration) { <-time.After(d) }

// Processes starting together add exactly cap leases between them.
func TestConcurrentSetupSetsCapLeases(t *testing.T) {
	t.Parallel()
	js, res := setup(t)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() { ensure(t, js, res, budget.Limit{Concurrency: 4}) })
	}
	wg.Wait()
	info, err := res.Slots.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(4), info.State.Msgs)

	// Lowered by processes starting together: each removes the leases past
	// the cap, none fails on a lease another removed first.
	for range 6 {
		wg.Go(func() { ensure(t, js, res, budget.Limit{Concurrency: 1}) })
	}
	wg.Wait()
	info, err = res.Slots.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs)
}

func TestRateLimitSpacesCalls(t *testing.T) {
	t.Parallel()
	js, res := setup(t)
	b := ensure(t, js, res, budget.Limit{Concurrency: 2, Rate: 20})
	start := time.Now()
	for range 10 {
		l, err := b.Acquire(context.Background())
		require.NoError(t, err)
		l.Release()
	}
	// Two leases, each resting 100 ms: ten calls need at least four rests.
	require.GreaterOrEqual(t, time.Since(start), 400*time.Millisecond)
}

func TestBusyWhenAllLeasesAreOut(t *testing.T) {
	t.Parallel()
	js, res := setup(t)
	b := ensure(t, js, res, budget.Limit{Concurrency: 1})
	b.Wait = 200 * time.Millisecond
	held, err := b.Acquire(context.Background())
	require.NoError(t, err)
	_, err = b.Acquire(context.Background())
	require.ErrorIs(t, err, budget.ErrBusy)
	held.Release()
	again, err := b.Acquire(context.Background())
	require.NoError(t, err, "a released lease is available again")
	again.Release()
}

// Raising a budget on restart tops up the leases; lowering it caps the
// consumer without losing any.
func TestReconfigure(t *testing.T) {
	t.Parallel()
	js, res := setup(t)
	ensure(t, js, res, budget.Limit{Concurrency: 2})
	b := ensure(t, js, res, budget.Limit{Concurrency: 5})
	b.Wait = 200 * time.Millisecond
	var held []*budget.Lease
	for range 5 {
		l, err := b.Acquire(context.Background())
		require.NoError(t, err)
		held = append(held, l)
	}
	_, err := b.Acquire(context.Background())
	require.ErrorIs(t, err, budget.ErrBusy)
	for _, l := range held {
		l.Release()
	}

	low := ensure(t, js, res, budget.Limit{Concurrency: 1})
	low.Wait = 200 * time.Millisecond
	l, err := low.Acquire(context.Background())
	require.NoError(t, err)
	_, err = low.Acquire(context.Background())
	require.ErrorIs(t, err, budget.ErrBusy, "the lower cap holds although five leases exist")
	l.Release()
}

// A busy process reuses its released leases instead of asking the server
// for each call, and an idle one gives them back to the fleet at once.
func TestLeaseReuse(t *testing.T) {
	t.Parallel()
	js, res := setup(t)
	busy := ensure(t, js, res, budget.Limit{Concurrency: 1})
	other := ensure(t, js, res, budget.Limit{Concurrency: 1})
	other.Wait = time.Second
	ctx := context.Background()
	for range 32 {
		l, err := busy.Acquire(ctx)
		require.NoError(t, err)
		l.Release()
	}
	c, err := res.Slots.Consumer(ctx, events.Default.BudgetConsumer("r", events.SlotStatus))
	require.NoError(t, err)
	info, err := c.Info(ctx)
	require.NoError(t, err)
	require.LessOrEqual(t, info.Delivered.Consumer, uint64(4), "32 calls, a lease fetched at most once per 16 (and when it went idle)")

	// The lease is idle in busy: within moments another process gets it.
	l, err := other.Acquire(ctx)
	require.NoError(t, err, "an idle lease returns to the fleet")
	busy.Wait = 200 * time.Millisecond
	_, err = busy.Acquire(ctx)
	require.ErrorIs(t, err, budget.ErrBusy, "the one lease is out")
	l.Release()
	other.Close()
	l, err = busy.Acquire(ctx)
	require.NoError(t, err, "Close returned the idle lease")
	l.Release()
}
