package route_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/platform/tracing"
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
	return tracedGate(t, f, rc, nil)
}

// tracedGate is gateSetup's gate, whose calls tracer traces.
func tracedGate(t *testing.T, f *gateFake, rc config.Route, tracer *tracing.Tracer) (*route.Gate, *route.Pauses, *[]observed) {
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
		BusyWait: 10 * time.Millisecond, Tracer: tracer,
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
	again, err := gates.OpenSubmit(ctx, r)
	require.NoError(t, err)
	require.Same(t, g, again, "a route's budgets are built once")
	require.Same(t, pauses, gates.Pauses())
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
		st, err := g.Call(ctx, route.Call{Op: op})
		require.NoError(t, err, op)
		require.Equal(t, "remote-1", st.RemoteID)
	}
	require.Equal(t, int32(4), f.calls.Load(), "each lease came back: no call waited for one")
	require.Equal(t, []observed{{route.OpSubmit, "ok"}, {route.OpStatus, "ok"}, {route.OpCancel, "ok"}, {route.OpStatus, "ok"}}, *seen)
}

// While the route is paused, nothing reaches the provider, and the held
// error says how long to wait. A rate limit the provider answers pauses
// it.
func TestGateHoldsWhileThePauseLasts(t *testing.T) {
	t.Parallel()
	f := &gateFake{}
	g, pauses, _ := gateSetup(t, f, config.Route{})
	ctx := context.Background()

	f.set(&provider.Error{Class: provider.RateLimited, HTTPStatus: 429, RetryAfter: time.Minute, Message: "slow down"}, nil)
	_, err := g.Call(ctx, route.Call{Op: route.OpStatus})
	require.Equal(t, provider.RateLimited, provider.ClassOf(err))
	var held *route.HeldError
	require.False(t, errors.As(err, &held), "the provider was called")
	require.Greater(t, pauses.Hold(g.Route), 50*time.Second, "the answer paused the route for its Retry-After")

	f.set(nil, nil)
	ready := false
	for _, op := range []route.Op{route.OpSubmit, route.OpStatus, route.OpCancel, route.OpFind} {
		_, err = g.Call(ctx, route.Call{Op: op, Ready: func(context.Context) (*state.Job, error) { ready = true; return nil, nil }})
		require.ErrorAs(t, err, &held, op)
		require.Equal(t, route.HeldPaused, held.Why, op)
		require.Greater(t, held.Wait, 50*time.Second, op)
	}
	require.False(t, ready, "nothing is recorded for a call that is not admitted")
	require.Equal(t, int32(1), f.calls.Load(), "no call while paused")
	d, why := g.Hold()
	require.Greater(t, d, 50*time.Second)
	require.NotEmpty(t, why)
}

// With every lease out, a call waits for none beyond its context: it is
// not made, and the held error says the budget is busy.
func TestGateWithoutALeaseMakesNoCall(t *testing.T) {
	t.Parallel()
	f := &gateFake{}
	g, _, seen := gateSetup(t, f, config.Route{})
	ctx := context.Background()

	block := make(chan struct{})
	f.set(nil, block)
	done := make(chan error)
	go func() {
		_, err := g.Call(ctx, route.Call{Op: route.OpStatus})
		done <- err
	}()
	require.Eventually(t, func() bool { return f.calls.Load() == 1 }, 10*time.Second, 5*time.Millisecond)

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err := g.Call(short, route.Call{Op: route.OpCancel})
	var held *route.HeldError
	require.ErrorAs(t, err, &held)
	require.Equal(t, route.HeldBusy, held.Why)
	require.Error(t, held.Err, "why no lease came")
	require.Positive(t, held.Wait)
	require.Equal(t, int32(1), f.calls.Load())

	close(block)
	require.NoError(t, <-done)
	require.Contains(t, *seen, observed{route.OpCancel, "budget_busy"}, "a call held for a lease is observed")
}

// A call Ready declines is not made, its lease goes back unused at once,
// and the error says it was declined and why.
func TestGateReadyDecides(t *testing.T) {
	t.Parallel()
	f := &gateFake{}
	g, _, _ := gateSetup(t, f, config.Route{})
	ctx := context.Background()

	moved := errors.New("the record moved on")
	_, err := g.Call(ctx, route.Call{Op: route.OpSubmit, Ready: func(context.Context) (*state.Job, error) { return nil, moved }})
	require.ErrorIs(t, err, route.ErrDeclined)
	require.ErrorIs(t, err, moved)
	require.Zero(t, f.calls.Load())

	// The budget allows one call at a time: the declined call's lease
	// came back, or this one would wait for it.
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = g.Call(short, route.Call{Op: route.OpSubmit, Ready: func(context.Context) (*state.Job, error) { return nil, nil }})
	require.NoError(t, err)
	require.Equal(t, int32(1), f.calls.Load())
}

// A call that outlives the route's timeout is cut at it.
func TestGateTimesCallsOut(t *testing.T) {
	t.Parallel()
	f := &gateFake{}
	g, _, seen := gateSetup(t, f, config.Route{CallTimeout: 200 * time.Millisecond})
	require.Equal(t, 200*time.Millisecond, g.Timeout(route.OpStatus))
	require.Equal(t, 200*time.Millisecond, g.Timeout(route.OpSubmit))
	f.set(nil, make(chan struct{})) // never answers
	_, err := g.Call(context.Background(), route.Call{Op: route.OpStatus})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Len(t, *seen, 1)
}

// Without a route's own timeout, a create or a lookup may take longer
// than a status call or a cancel.
func TestGateTimeoutsByCall(t *testing.T) {
	t.Parallel()
	g, _, _ := gateSetup(t, &gateFake{}, config.Route{})
	require.Equal(t, 30*time.Second, g.Timeout(route.OpSubmit))
	require.Equal(t, 30*time.Second, g.Timeout(route.OpFind))
	require.Equal(t, 20*time.Second, g.Timeout(route.OpStatus))
	require.Equal(t, 20*time.Second, g.Timeout(route.OpCancel))
}

// A find on a provider that cannot find jobs is refused without a call.
func TestGateFindNeedsAFinder(t *testing.T) {
	t.Parallel()
	f := &gateFake{}
	g, _, _ := gateSetup(t, f, config.Route{})
	require.False(t, g.Route.CanFind())
	_, err := g.Call(context.Background(), route.Call{Op: route.OpFind})
	require.Error(t, err)
	require.NotErrorIs(t, err, route.ErrNoSuchJob)
	require.Zero(t, f.calls.Load())
}

// finderFake is a gateFake that can find jobs: found says whether it
// has the one asked for.
type finderFake struct {
	gateFake
	found bool
}

func (f *finderFake) Find(ctx context.Context, _ provider.SubmitRequest) (provider.Status, bool, error) {
	st, err := f.answer(ctx)
	return st, f.found, err
}

// A find answers the job found, or ErrNoSuchJob — an answer, observed
// as one, not a failure.
func TestGateFind(t *testing.T) {
	t.Parallel()
	f := &finderFake{found: true}
	g, _, seen := gateSetup(t, &f.gateFake, config.Route{})
	g.Route.Adapter = f
	st, err := g.Call(context.Background(), route.Call{Op: route.OpFind})
	require.NoError(t, err)
	require.Equal(t, "remote-1", st.RemoteID)
	f.found = false
	_, err = g.Call(context.Background(), route.Call{Op: route.OpFind})
	require.ErrorIs(t, err, route.ErrNoSuchJob)
	require.Equal(t, []observed{{route.OpFind, "ok"}, {route.OpFind, "ok"}}, *seen)
}

// A call is a span in the job's trace, naming the job as Ready recorded
// it; a call with neither a job nor a caller's span makes none.
func TestGateTracesCalls(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	g, _, _ := tracedGate(t, &gateFake{}, config.Route{}, tracing.New(tp))
	const jobTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	_, err := g.Call(context.Background(), route.Call{Op: route.OpSubmit, Job: &state.Job{ID: "j"},
		Ready: func(context.Context) (*state.Job, error) {
			return &state.Job{ID: "j", Model: "m", Trace: jobTrace, SubmitAttempts: 2}, nil
		}})
	require.NoError(t, err)
	_, err = g.Call(context.Background(), route.Call{Op: route.OpStatus})
	require.NoError(t, err)
	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	sp := spans[0]
	require.Equal(t, "provider submit", sp.Name)
	require.Equal(t, tracing.Parse(jobTrace).TraceID(), sp.SpanContext.TraceID())
	got := map[string]any{}
	for _, kv := range sp.Attributes {
		got[string(kv.Key)] = kv.Value.AsInterface()
	}
	require.Equal(t, "j", got["pollux.job.id"])
	require.Equal(t, int64(2), got["pollux.submit.attempt"])
	require.Equal(t, "remote-1", got["pollux.remote_id"])
}

// The running slots are the gate's: a level full names itself, and a
// freed slot serves the next job.
func TestGateHoldsRunningSlots(t *testing.T) {
	t.Parallel()
	f := &gateFake{}
	g, _, _ := gateSetup(t, f, config.Route{})
	ctx := context.Background()
	held, full, err := g.Take(ctx, "a", "", nil)
	require.NoError(t, err)
	require.Empty(t, full)
	require.Len(t, held, 1)
	_, full, err = g.Take(ctx, "b", "", nil)
	require.NoError(t, err)
	require.Equal(t, "route r", full)
	require.NoError(t, g.Free(ctx, "a", "", nil))
	_, full, err = g.Take(ctx, "b", "", nil)
	require.NoError(t, err)
	require.Empty(t, full)
}
