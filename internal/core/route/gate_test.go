package route_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

// gateFake is a provider whose every call answers err (nil: accepted),
// after block is closed when it is set, and counts the calls it got.
type gateFake struct {
	mu    sync.Mutex
	err   error
	block chan struct{}
	calls atomic.Int32
	// tagged is set when a call's context carries a ctxKey value.
	tagged atomic.Bool
}

type ctxKey struct{}

func (f *gateFake) Info() provider.Info { return provider.Info{Kind: "fake", Cancel: true} }

func (f *gateFake) answer(ctx context.Context) (provider.Status, error) {
	f.calls.Add(1)
	if ctx.Value(ctxKey{}) != nil {
		f.tagged.Store(true)
	}
	f.mu.Lock()
	err, block := f.err, f.block
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return provider.Status{}, ctx.Err()
		}
	}
	if err != nil {
		return provider.Status{}, err
	}
	return provider.Status{RemoteID: "remote-1", Observation: state.Observation{State: state.Queued}}, nil
}

func (f *gateFake) Submit(ctx context.Context, _ provider.SubmitRequest) (provider.Status, error) {
	return f.answer(ctx)
}

func (f *gateFake) Status(ctx context.Context, _ provider.Ref) (provider.Status, error) {
	return f.answer(ctx)
}

func (f *gateFake) Cancel(ctx context.Context, _ provider.Ref) (provider.Status, error) {
	return f.answer(ctx)
}

func (f *gateFake) set(err error, block chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.block = err, block
}

// observed is one call a gate observed.
type observed struct {
	op    route.Op
	class string
}

// gateSetup opens the gate of route r (a status and submit budget of one
// call at a time, a running cap of one) on an embedded server, as ingest
// does.
func gateSetup(t *testing.T, f *gateFake, rc config.Route) (*route.Gate, *route.Pauses, *[]observed) {
	t.Helper()
	_, _, js := natstest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	res, err := events.Default.Setup(ctx, js, events.Options{})
	require.NoError(t, err)
	pauses := route.NewPauses(res.Routes, zerolog.Nop())
	ready := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { require.NoError(t, pauses.Run(ctx, ready)) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	<-ready

	r, err := route.New("r", f, rc, 0)
	require.NoError(t, err)
	r.Levels = []budget.Level{{Level: events.LevelRoute, Name: "r",
		Submit: budget.Limit{Concurrency: 1}, Status: budget.Limit{Concurrency: 1}, Running: 1}}
	var mu sync.Mutex
	var seen []observed
	gates := route.NewGates(js, events.Default, res.Slots, events.Options{}, pauses, route.GateConfig{
		Submit: true, BusyWait: 10 * time.Millisecond,
		Observe: func(routeName string, op route.Op, class string, _ time.Duration) {
			require.Equal(t, "r", routeName)
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, observed{op, class})
		},
	})
	t.Cleanup(gates.Close)
	g, err := gates.Open(ctx, r)
	require.NoError(t, err)
	again, err := gates.Open(ctx, r)
	require.NoError(t, err)
	require.Same(t, g, again, "a route's budgets are built once")
	return g, pauses, &seen
}

// A call is made under a lease, observed, and answered with what the
// provider said; its lease comes back for the next call.
func TestGateCallsUnderALease(t *testing.T) {
	t.Parallel()
	f := &gateFake{}
	g, _, seen := gateSetup(t, f, config.Route{})
	ctx := context.Background()
	for _, op := range []route.Op{route.OpSubmit, route.OpStatus, route.OpCancel, route.OpStatus} {
		a := g.Call(ctx, route.Call{Op: op})
		require.True(t, a.Called, op)
		require.NoError(t, a.Err)
		require.Equal(t, "remote-1", a.Status.RemoteID)
		require.Zero(t, a.Pause)
	}
	require.Equal(t, int32(4), f.calls.Load(), "each lease came back: no call waited for one")
	require.Equal(t, []observed{{route.OpSubmit, "ok"}, {route.OpStatus, "ok"}, {route.OpCancel, "ok"}, {route.OpStatus, "ok"}}, *seen)
}

// While the route is paused, nothing reaches the provider, and the answer
// says how long to wait. A rate limit the provider answers pauses it.
func TestGateHoldsWhileThePauseLasts(t *testing.T) {
	t.Parallel()
	f := &gateFake{}
	g, pauses, _ := gateSetup(t, f, config.Route{})
	ctx := context.Background()

	f.set(&provider.Error{Class: provider.RateLimited, HTTPStatus: 429, RetryAfter: time.Minute, Message: "slow down"}, nil)
	a := g.Call(ctx, route.Call{Op: route.OpStatus})
	require.True(t, a.Called)
	require.Equal(t, provider.RateLimited, provider.ClassOf(a.Err))
	require.Greater(t, a.Pause, 50*time.Second, "the answer paused the route for its Retry-After")
	require.Greater(t, pauses.Hold(g.Route), 50*time.Second)

	f.set(nil, nil)
	ready := false
	for _, op := range []route.Op{route.OpSubmit, route.OpStatus, route.OpCancel, route.OpFind} {
		a = g.Call(ctx, route.Call{Op: op, Ready: func(ctx context.Context) (context.Context, bool) { ready = true; return ctx, true }})
		require.False(t, a.Called, op)
		require.True(t, a.Paused, op)
		require.Greater(t, a.Wait, 50*time.Second, op)
	}
	require.False(t, ready, "nothing is recorded for a call that is not admitted")
	require.Equal(t, int32(1), f.calls.Load(), "no call while paused")
	d, why := g.Hold()
	require.Greater(t, d, 50*time.Second)
	require.NotEmpty(t, why)
}

// With every lease out, a call waits for none beyond its context: it is
// not made, and the answer says the budget is busy.
func TestGateWithoutALeaseMakesNoCall(t *testing.T) {
	t.Parallel()
	f := &gateFake{}
	g, _, _ := gateSetup(t, f, config.Route{})
	ctx := context.Background()

	block := make(chan struct{})
	f.set(nil, block)
	done := make(chan route.Answer)
	go func() { done <- g.Call(ctx, route.Call{Op: route.OpStatus}) }()
	require.Eventually(t, func() bool { return f.calls.Load() == 1 }, 10*time.Second, 5*time.Millisecond)

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	a := g.Call(short, route.Call{Op: route.OpCancel})
	require.False(t, a.Called)
	require.True(t, a.Busy)
	require.Error(t, a.Err)
	require.Positive(t, a.Wait)
	require.Equal(t, int32(1), f.calls.Load())

	close(block)
	require.True(t, (<-done).Called)
}

// A call Ready declines is not made, and its lease goes back unused at
// once; Ready's context is the call's.
func TestGateReadyDecides(t *testing.T) {
	t.Parallel()
	f := &gateFake{}
	g, _, _ := gateSetup(t, f, config.Route{})
	ctx := context.Background()

	a := g.Call(ctx, route.Call{Op: route.OpSubmit, Ready: func(ctx context.Context) (context.Context, bool) { return ctx, false }})
	require.False(t, a.Called)
	require.True(t, a.Skipped)
	require.Zero(t, f.calls.Load())

	// The budget allows one call at a time: the declined call's lease
	// came back, or this one would wait for it.
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	a = g.Call(short, route.Call{Op: route.OpSubmit, Ready: func(ctx context.Context) (context.Context, bool) {
		return context.WithValue(ctx, ctxKey{}, "span"), true
	}})
	require.True(t, a.Called)
	require.True(t, f.tagged.Load(), "the call is made in Ready's context")
}

// A call that outlives the route's timeout is cut at it.
func TestGateTimesCallsOut(t *testing.T) {
	t.Parallel()
	f := &gateFake{}
	g, _, seen := gateSetup(t, f, config.Route{CallTimeout: 200 * time.Millisecond})
	require.Equal(t, 200*time.Millisecond, g.Timeout())
	f.set(nil, make(chan struct{})) // never answers
	a := g.Call(context.Background(), route.Call{Op: route.OpStatus})
	require.True(t, a.Called)
	require.ErrorIs(t, a.Err, context.DeadlineExceeded)
	require.Len(t, *seen, 1)
}

// A find on a provider that cannot find jobs is refused without a call.
func TestGateFindNeedsAFinder(t *testing.T) {
	t.Parallel()
	f := &gateFake{}
	g, _, _ := gateSetup(t, f, config.Route{})
	require.False(t, g.Route.CanFind())
	a := g.Call(context.Background(), route.Call{Op: route.OpFind})
	require.Error(t, a.Err)
	require.False(t, a.Found)
	require.Zero(t, f.calls.Load())
}

// The running slots are the gate's: a level full names itself, and a
// freed slot serves the next job.
func TestGateHoldsRunningSlots(t *testing.T) {
	t.Parallel()
	f := &gateFake{}
	g, _, _ := gateSetup(t, f, config.Route{})
	ctx := context.Background()
	held, full, err := g.Take(ctx, "a", nil)
	require.NoError(t, err)
	require.Empty(t, full)
	require.Len(t, held, 1)
	_, full, err = g.Take(ctx, "b", nil)
	require.NoError(t, err)
	require.Equal(t, "route r", full)
	require.NoError(t, g.Free(ctx, "a", nil))
	_, full, err = g.Take(ctx, "b", nil)
	require.NoError(t, err)
	require.Empty(t, full)
}
