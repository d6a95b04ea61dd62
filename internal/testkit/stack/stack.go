// Package stack gives a service's tests the part of a running Pollux the
// service is built from: an embedded NATS server, one namespace's streams
// and buckets, the jobs' owner, the routes' pauses and the routes over
// the test's adapters — the arguments of the services' constructors, not
// a whole binary's environment (internal/wiring/app). A test builds a
// stack, hands the service its parts, and runs it with Go:
//
//	s := stack.One(t, "fake", adapter, config.Route{})
//	svc, err := ingest.New(ingest.Config{Routes: s.Routes, Options: s.Options},
//		s.JS, s.NS, s.Res, s.Jobs.Intake(), s.Gates(route.GateConfig{}))
//	require.NoError(t, err)
//	s.Go(svc.Run)
//	s.Publish(s.NS.Submit("fake"), events.Submit{...})
//	j := s.Until("job-1", func(j *state.Job) bool { return j.State.Terminal() })
//
// Everything a stack starts stops when the test ends, in order: the
// services, then the mirror of route pauses, then the connection and the
// server. Only tests import it (.golangci.yml: test-support-stays-in-tests).
package stack

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Config says what a stack holds. Its zero value is the default namespace
// with no routes.
type Config struct {
	// Pollux is the configuration: the prefix, the streams' options, each
	// route's settings by name (a route with an adapter and no settings
	// has the zero settings) and the model routes (nil: the defaults).
	Pollux *config.Config
	// Adapters are the routes' providers, by route name.
	Adapters map[string]provider.Adapter
	// Hooks observe the owner. Its running slots are always freed through
	// the fleet's releaser, as in the binaries.
	Hooks jobs.Hooks
	// Restartable runs the stack on a server the test can stop and start
	// again on its port and files (Stack.NATS), as an operator restarts
	// one; the stack's connection reconnects forever.
	Restartable bool
}

// Stack is one namespace on an embedded server, with the parts the
// services are built from.
type Stack struct {
	// Server is the embedded server (a test may shut it down); nil on a
	// restartable stack, whose server is NATS.
	Server *server.Server
	// NATS is a restartable stack's server (Config.Restartable).
	NATS *natstest.Restartable
	NC   *nats.Conn
	JS   jetstream.JetStream
	NS   events.Namespace
	Res  *events.Resources
	// Options are the streams' options of the configuration.
	Options events.Options
	// Jobs is the jobs' owner; each service takes its view (Jobs.Intake(),
	// Jobs.Polls(), Jobs.Webhooks(), Jobs.Custody()).
	Jobs *jobs.Owner
	// Pauses mirror the routes' pauses (running until the test ends).
	Pauses *route.Pauses
	// Routes are the routes over Config.Adapters; ModelRoutes the
	// configuration's model routes over them.
	Routes      map[string]*route.Route
	ModelRoutes map[string]*route.ModelRoute

	t   testing.TB
	ctx context.Context
	g   *errgroup.Group
}

// New starts a server and builds the stack on it; everything stops when
// the test ends.
func New(t testing.TB, cfg Config) *Stack {
	t.Helper()
	var (
		srv  *server.Server
		rsrv *natstest.Restartable
		nc   *nats.Conn
		js   jetstream.JetStream
	)
	if cfg.Restartable {
		rsrv = natstest.NewRestartable(t)
		nc, js = rsrv.Connect(t)
	} else {
		srv, nc, js = natstest.JetStream(t)
	}
	c := cfg.Pollux
	if c == nil {
		c = &config.Config{}
	}
	ns, err := events.NewNamespace(c.Prefix)
	require.NoError(t, err)
	opts := c.Streams.Options()
	// The test's context ends before the cleanups run: the services stop
	// first, then the connection and the server (registered before).
	ctx := t.Context()
	g, gctx := errgroup.WithContext(ctx)
	s := &Stack{Server: srv, NATS: rsrv, NC: nc, JS: js, NS: ns, Options: opts, Routes: map[string]*route.Route{}, t: t, ctx: gctx, g: g}
	t.Cleanup(func() { require.NoError(t, g.Wait(), "a service of the stack failed") })

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s.Res, err = ns.Setup(sctx, js, opts)
	require.NoError(t, err)
	s.Pauses = route.NewPauses(s.Res.Routes, zerolog.Nop())
	ready := make(chan struct{})
	g.Go(func() error { return s.Pauses.Run(gctx, ready) })
	select {
	case <-ready:
	case <-sctx.Done():
		t.Fatal("the route pauses did not load")
	}
	for name, a := range cfg.Adapters {
		rt, err := route.New(name, a, c.Routes[name], 1)
		require.NoError(t, err, "route %s", name)
		s.Routes[name] = rt
	}
	s.ModelRoutes, err = route.BuildModels(c, s.Routes)
	require.NoError(t, err)
	s.Jobs = jobs.New(ns, js, s.Res, jobs.Config{Options: opts, Hooks: cfg.Hooks, Slots: budget.NewReleaser(js, ns)})
	return s
}

// One is a stack with one route, name, over adapter a with settings rc.
func One(t testing.TB, name string, a provider.Adapter, rc config.Route) *Stack {
	t.Helper()
	return New(t, Config{
		Pollux:   &config.Config{Routes: map[string]config.Route{name: rc}},
		Adapters: map[string]provider.Adapter{name: a},
	})
}

// Gates returns the process's gates as package app builds them: one pool
// of leases over the stack's slots stream, holding calls by the stack's
// pauses; they close when the test ends, after the services. Every
// service of a test process shares one, as the binaries' services do.
func (s *Stack) Gates(cfg route.GateConfig) *route.Gates {
	gs := route.NewGates(s.JS, s.NS, s.Res.Slots, s.Options, s.Pauses, cfg)
	s.t.Cleanup(gs.Close)
	return gs
}

// Go runs fn (a service's Run) until the test ends; an error it returns
// fails the test, and ends the stack's context (Ctx) for the others.
func (s *Stack) Go(fn func(ctx context.Context) error) { s.g.Go(func() error { return fn(s.ctx) }) }

// Ctx is the stack's context: it ends when the test ends, or when a
// service run by Go failed.
func (s *Stack) Ctx() context.Context { return s.ctx }

// Publish publishes v as JSON on subject.
func (s *Stack) Publish(subject string, v any) {
	s.t.Helper()
	b, err := json.Marshal(v)
	require.NoError(s.t, err)
	_, err = s.JS.Publish(s.ctx, subject, b)
	require.NoError(s.t, err)
}

// Accept stores job j as ingest would, requiring that it was created.
func (s *Stack) Accept(j *state.Job) jobs.Record {
	s.t.Helper()
	r, created, err := s.Jobs.Intake().Accept(s.ctx, j)
	require.NoError(s.t, err)
	require.True(s.t, created, "job %s created", j.ID)
	return r
}

// Job returns job id's record, failing the test when it cannot.
func (s *Stack) Job(id string) *state.Job {
	s.t.Helper()
	j, err := s.Jobs.Get(context.Background(), id)
	require.NoError(s.t, err, "job %s", id)
	return j
}

// Until waits (up to 20 s) for job id's record to satisfy ok and returns
// it.
func (s *Stack) Until(id string, ok func(*state.Job) bool) *state.Job {
	s.t.Helper()
	var j *state.Job
	require.Eventually(s.t, func() bool {
		var err error
		j, err = s.Jobs.Get(context.Background(), id)
		return err == nil && ok(j)
	}, 20*time.Second, 10*time.Millisecond, "job %s: %+v", id, j)
	return j
}
