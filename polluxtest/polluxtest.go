// Package polluxtest runs a whole Pollux fleet inside a Go test: an
// embedded NATS server, the ingest, poller and webhook services, the HTTP
// front door and the simulated provider (package sim), in one call,
// stopped when the test ends. A test submits jobs through Fleet.Client
// and asserts on their events and records, and on the simulated
// provider's ground truth (Fleet.Sim.Stats, Fleet.Sim.Predictions):
//
//	func TestRender(t *testing.T) {
//		f := polluxtest.Start(t, polluxtest.Config{Sim: sim.Config{TimeScale: 50}})
//		job, err := f.Client.Submit(ctx, f.Route, events.Submit{Model: "owner/model", IdempotencyKey: "render-1"})
//		...
//		final, err := f.Client.Wait(ctx, job)
//		require.Equal(t, state.Succeeded, final.State)
//	}
//
// The simulated provider speaks Replicate's API. Its Config sets models'
// durations and failure rates, faults (rate limits, 5xx, lost and stuck
// predictions, late or missing webhooks) and hidden account limits; its
// TimeScale speeds every duration up, and the fleet's schedule with it.
package polluxtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/platform/embedded"
	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/client"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// Config configures a fleet. The zero value is a fleet whose simulated
// provider runs every job in real time, calls back, and never fails.
type Config struct {
	// Sim configures the simulated provider: models, faults, hidden
	// limits, the seed, and TimeScale (a test usually wants 20 to 100).
	Sim sim.Config
	// NoWebhooks runs the route poll-only: the provider never calls back.
	NoWebhooks bool
	// Log receives every component's log lines (default: none).
	Log zerolog.Logger
}

// Fleet is a running fleet.
type Fleet struct {
	// Client is a client of the fleet, on its own NATS connection.
	Client *client.Client
	// Route is the route the simulated provider serves.
	Route string
	// Sim is the simulated provider: its ground truth and its knobs.
	Sim *sim.Server
	// NATSURL reaches the embedded NATS server, for other clients.
	NATSURL string
	// HTTPURL is the front door's base URL (POST /v1/jobs, SSE, ...).
	HTTPURL string

	stop func() error
}

// New starts a fleet; Close stops it.
func New(ctx context.Context, cfg Config) (*Fleet, error) {
	dir, err := os.MkdirTemp("", "polluxtest-")
	if err != nil {
		return nil, fmt.Errorf("polluxtest: %w", err)
	}
	srv, err := embedded.Start(embedded.Config{StoreDir: dir})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("polluxtest: %w", err)
	}
	var conns []*nats.Conn
	stopServer := func() {
		for _, nc := range conns {
			nc.Close()
		}
		srv.Shutdown()
		srv.WaitForShutdown()
		_ = os.RemoveAll(dir)
	}
	connect := func(name string) (*nats.Conn, error) {
		nc, err := nats.Connect(srv.ClientURL(), nats.Name(name))
		if err == nil {
			conns = append(conns, nc)
		}
		return nc, err
	}
	fleetConn, err := connect("polluxtest-fleet")
	if err != nil {
		stopServer()
		return nil, fmt.Errorf("polluxtest: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g, gctx := errgroup.WithContext(runCtx)
	st, err := dev.Start(gctx, g, fleetConn, dev.StackConfig{
		Sim:        cfg.Sim,
		Route:      config.Route{Workers: config.Workers{Submit: 8}},
		NoWebhooks: cfg.NoWebhooks,
		Logger:     cfg.Log,
	})
	stop := func() error {
		cancel()
		err := g.Wait()
		stopServer()
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		return err
	}
	if err != nil {
		_ = stop()
		return nil, fmt.Errorf("polluxtest: %w", err)
	}
	clientConn, err := connect("polluxtest-client")
	if err != nil {
		_ = stop()
		return nil, fmt.Errorf("polluxtest: %w", err)
	}
	c, err := client.New(clientConn)
	if err != nil {
		_ = stop()
		return nil, fmt.Errorf("polluxtest: %w", err)
	}
	return &Fleet{Client: c, Route: dev.RouteName, Sim: st.Sim, NATSURL: srv.ClientURL(), HTTPURL: st.HTTPURL, stop: stop}, nil
}

// Close stops the fleet and removes its files. It reports what stopped
// a service before, if anything did.
func (f *Fleet) Close() error {
	if f.stop == nil {
		return nil
	}
	stop := f.stop
	f.stop = nil
	return stop()
}

// Start starts a fleet for t, stopped when t ends; a fleet that does not
// start fails t at once.
func Start(t testing.TB, cfg Config) *Fleet {
	t.Helper()
	f, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("polluxtest: %v", err)
		}
	})
	return f
}
