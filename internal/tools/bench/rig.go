package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/poller"
	"github.com/pollux-dev/pollux/internal/wiring/app"
	"github.com/pollux-dev/pollux/internal/wiring/metrics"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
)

// benchRoute is the route every measurement uses.
const benchRoute = "bench"

// rig is one Pollux namespace on the bench's server: its streams and
// buckets, the route pause and learned-duration mirrors, and whatever
// services a measurement starts. Each measurement uses a fresh prefix and
// removes its namespace at the end, so measurements do not see each
// other's jobs.
type rig struct {
	env    *app.Env
	route  *route.Route
	g      *errgroup.Group
	ctx    context.Context
	cancel context.CancelFunc
	// calls counts the status calls the rig's gates made (in-process
	// pollers').
	calls atomic.Int64
	// lateness, when set, observes each check's lateness.
	lateness func(time.Duration)

	closeOnce sync.Once
	closeErr  error
}

var prefixes atomic.Int64

func openRig(ctx context.Context, nc *nats.Conn, streams config.Streams, rc config.Route, a provider.Adapter, opts ...app.Option) (*rig, error) {
	cfg := &config.Config{
		Prefix:  fmt.Sprintf("bench%d", prefixes.Add(1)),
		Streams: streams,
		Routes:  map[string]config.Route{benchRoute: rc},
	}
	r, err := route.New(benchRoute, a, rc, 1)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(rctx)
	rg := &rig{route: r, g: g, ctx: gctx, cancel: cancel}
	opts = append(opts, app.WithCalls(func(_ string, op route.Op, class string, _ time.Duration) {
		if op == route.OpStatus && class != string(route.HeldBusy) {
			rg.calls.Add(1)
		}
	}))
	env, err := app.Open(gctx, g, cfg, nc, map[string]*route.Route{benchRoute: r}, metrics.New(), zerolog.Nop(), opts...)
	if err != nil {
		cancel()
		_ = g.Wait()
		return nil, err
	}
	rg.env = env
	return rg, nil
}

// seed writes n running jobs whose first checks are spread evenly over
// spread from now on; with tracing on, each with a trace context.
func (r *rig) seed(ctx context.Context, n int, spread time.Duration, remote func(i int) string, progress func(int)) error {
	now := time.Now()
	return seed(ctx, r.env.JS, r.env.NS, r.env.Res, benchRoute, n,
		func(i int) time.Time { return now.Add(spread * time.Duration(i) / time.Duration(n)) }, remote, progress,
		r.env.Jobs.Tracer() != nil)
}

// startPoller runs a poller in this process, its status calls counted.
func (r *rig) startPoller() error {
	m := r.env.Metrics.Poller()
	if r.lateness != nil {
		late := m.Lateness
		m.Lateness = func(route string, d time.Duration) {
			r.lateness(d)
			late(route, d)
		}
	}
	po, err := poller.New(poller.Config{Routes: r.env.Routes, Options: r.env.Options(), Metrics: m},
		r.env.JS, r.env.NS, r.env.Res, r.env.Jobs.Polls(), r.env.Gates)
	if err != nil {
		return err
	}
	r.g.Go(func() error { return po.Run(r.ctx) })
	return nil
}

// close stops the services and removes the namespace's streams and
// buckets; later calls return the first call's result.
func (r *rig) close() error {
	r.closeOnce.Do(func() { r.closeErr = r.teardown() })
	return r.closeErr
}

func (r *rig) teardown() error {
	r.cancel()
	err := r.g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	r.env.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range r.env.NS.Streams(events.Options{}) {
		err = errors.Join(err, r.env.JS.DeleteStream(ctx, s.Name))
	}
	for _, b := range r.env.NS.Buckets(events.Options{}) {
		err = errors.Join(err, r.env.JS.DeleteKeyValue(ctx, b.Bucket))
	}
	return err
}

func remoteID(i int) string { return fmt.Sprintf("r-%07d", i) }
