package dev_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/ingest"
	"github.com/pollux-dev/pollux/internal/services/poller"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/internal/wiring/app"
	"github.com/pollux-dev/pollux/internal/wiring/metrics"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/replicate"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// routed is a fleet (ingest and a poller) over two simulated providers
// serving one model: "steady" (runs a given median, σ 0.2; a given share
// of its jobs never finish) and "flaky" (10 s, but 30% of its jobs fail), and the
// model route "video" over both, flaky first. Model time is compressed
// 20×.
type routed struct {
	env  *app.Env
	sims map[string]*sim.Server
}

const routedScale = 20

func startRouted(t *testing.T, hedge bool, steadyRun time.Duration, neverFinish float64) *routed {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	nc, _ := natstest.Connect(t, natstest.Server(t))
	g, gctx := errgroup.WithContext(ctx)
	t.Cleanup(func() {
		cancel()
		require.NoError(t, g.Wait())
	})
	models := map[string]sim.Model{
		"steady": {QueueMedian: sim.Duration(time.Second), RunMedian: sim.Duration(steadyRun), RunSigma: 0.2, NeverFinish: neverFinish},
		"flaky":  {QueueMedian: sim.Duration(time.Second), RunMedian: sim.Duration(10 * time.Second), RunSigma: 0.2, FailRate: 0.3},
	}
	rs := &routed{sims: map[string]*sim.Server{}}
	routes := map[string]*route.Route{}
	cfg := &config.Config{Routes: map[string]config.Route{},
		ModelRoutes: map[string]config.ModelRoute{"video": {Hedge: hedge, Members: []config.ModelRouteMember{
			{Route: "flaky", Model: "acme/video-flaky"}, {Route: "steady", Model: "acme/video"}}}}}
	for i, name := range []string{"flaky", "steady"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		url := "http://" + ln.Addr().String()
		srv, err := sim.New(sim.Config{Default: models[name], TimeScale: routedScale, Seed: int64(7 + i), Token: "tok", BaseURL: url})
		require.NoError(t, err)
		g.Go(func() error { return app.ServeHTTP(gctx, "simulated provider", ln, srv.Handler()) })
		g.Go(func() error { return srv.Run(gctx) })
		a, err := replicate.New(provider.Config{Route: name, Kind: replicate.Kind, BaseURL: url, Token: "tok",
			Options: json.RawMessage(`{"idempotent":true}`)})
		require.NoError(t, err)
		rc := config.Route{Kind: replicate.Kind, Workers: config.Workers{Submit: 8, Status: 16}}
		r, err := route.New(name, a, rc, routedScale)
		require.NoError(t, err)
		routes[name], cfg.Routes[name], rs.sims[name] = r, rc, srv
	}
	env, err := app.Open(gctx, g, cfg, nc, routes, metrics.New(), zerolog.Nop())
	require.NoError(t, err)
	in, err := ingest.New(ingest.Config{Routes: routes, ModelRoutes: env.ModelRoutes, Options: env.Options(), Learned: env.Stats,
		Logger: zerolog.Nop()}, env.JS, env.NS, env.Res, env.Jobs.Intake(), env.Gates)
	require.NoError(t, err)
	po, err := poller.New(poller.Config{Routes: routes, ModelRoutes: env.ModelRoutes, Options: env.Options(), Learned: env.Stats,
		Logger: zerolog.Nop()}, env.JS, env.NS, env.Res, env.Jobs.Polls(), env.Gates)
	require.NoError(t, err)
	g.Go(func() error { return in.Run(gctx) })
	g.Go(func() error { return po.Run(gctx) })
	rs.env = env
	return rs
}

// submit submits n jobs to route, one every gap, with deadlines timeout
// away, and returns their ids.
func (rs *routed) submit(t *testing.T, route, model, prefix string, n int, gap, timeout time.Duration) []string {
	t.Helper()
	ids := make([]string, n)
	tick := time.NewTicker(gap) // the jobs arrive spread, as a client's would
	defer tick.Stop()
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", prefix, i)
		b, err := json.Marshal(events.Submit{V: events.Version, ID: ids[i], Model: model, Input: json.RawMessage(`{"prompt":"a kite"}`),
			TimeoutS: timeout.Seconds()})
		require.NoError(t, err)
		_, err = rs.env.JS.Publish(t.Context(), rs.env.NS.Submit(route), b)
		require.NoError(t, err)
		<-tick.C
	}
	return ids
}

// ended waits for the jobs to end and returns their records.
func (rs *routed) ended(t *testing.T, ids []string, within time.Duration) []*state.Job {
	t.Helper()
	out := make([]*state.Job, len(ids))
	require.Eventually(t, func() bool {
		for i, id := range ids {
			if out[i] != nil && out[i].State.Terminal() {
				continue
			}
			j, err := rs.env.Jobs.Get(t.Context(), id)
			if err != nil || !j.State.Terminal() {
				return false
			}
			out[i] = j
		}
		return true
	}, within, 20*time.Millisecond)
	return out
}

// terminalEvents counts the terminal events of every job, on any route.
func (rs *routed) terminalEvents(t *testing.T) map[string]int {
	t.Helper()
	c, err := rs.env.JS.OrderedConsumer(t.Context(), rs.env.NS.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{rs.env.NS.Events()}})
	require.NoError(t, err)
	info, err := c.Info(t.Context())
	require.NoError(t, err)
	n := map[string]int{}
	for left := info.NumPending; left > 0; left-- {
		msg, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
		require.NoError(t, err)
		ev, err := events.DecodeEvent(msg.Data())
		if err != nil || ev.JobID == "" { // a route event
			continue
		}
		if ev.Type != events.EventRejected && ev.State.Terminal() {
			n[ev.JobID]++
		}
	}
	return n
}

// figures are what a run of jobs cost and gave.
type figures struct {
	jobs, succeeded   int
	polls             float64 // status calls per job, at every provider
	meanToSuccess     time.Duration
	routes            map[string]int
	hedged, hedgeWins int
}

func (rs *routed) figures(jobs []*state.Job) figures {
	f := figures{jobs: len(jobs), routes: map[string]int{}}
	var total time.Duration
	calls := 0
	for _, s := range rs.sims {
		calls += s.Stats().StatusCalls
	}
	for _, j := range jobs {
		f.routes[j.Route]++
		if j.State == state.Succeeded {
			f.succeeded++
			total += j.DetectedAt.Sub(j.CreatedAt)
		}
		if j.Routing != nil && j.Routing.HedgedBy != "" {
			f.hedged++
			if j.DetectedBy == state.FromHedge {
				f.hedgeWins++
			}
		}
	}
	f.polls = float64(calls) / float64(len(jobs))
	if f.succeeded > 0 {
		f.meanToSuccess = total / time.Duration(f.succeeded)
	}
	return f
}

func (f figures) String() string {
	return fmt.Sprintf("%d jobs: %d succeeded (%.0f%%), mean time to a success %.2fs real (%.0fs model), %.2f status calls a job, routes %v, hedged %d (the hedge won %d)",
		f.jobs, f.succeeded, 100*float64(f.succeeded)/float64(f.jobs), f.meanToSuccess.Seconds(), f.meanToSuccess.Seconds()*routedScale,
		f.polls, f.routes, f.hedged, f.hedgeWins)
}

// Two simulated providers serve one model: jobs submitted to the model
// route go to the one that succeeds sooner once what each does is learned
// (steady: flaky's 30% failures make its expected time to a success the
// longer), fail over when it pauses, and every job is created on one
// route once.
func TestAModelRouteGoesToTheBetterProvider(t *testing.T) {
	t.Parallel()
	rs := startRouted(t, false, 12*time.Second, 0)
	warm := rs.ended(t, rs.submit(t, "video", "acme/video", "warm", 60, 25*time.Millisecond, time.Minute), time.Minute)
	t.Logf("learning: %v", rs.figures(warm))
	later := rs.ended(t, rs.submit(t, "video", "acme/video", "later", 60, 25*time.Millisecond, time.Minute), time.Minute)
	f := rs.figures(later)
	t.Logf("learned: %v", f)
	require.GreaterOrEqual(t, f.routes["steady"], 50, "most jobs go to steady once both are learned")
	for _, j := range later {
		require.Equal(t, "video", j.Routing.Via)
		require.Len(t, j.Routing.Candidates, 2)
	}
	rate, _ := rs.env.Stats.Failures("flaky", "acme/video-flaky")
	require.InDelta(t, 0.3, rate, 0.2, "flaky's failures learned")

	_, err := rs.env.Pauses.RateLimited(t.Context(), "steady", time.Minute, "test: steady refuses calls")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rs.env.Pauses.Remaining("steady") > 0 }, 5*time.Second, 10*time.Millisecond)
	over := rs.ended(t, rs.submit(t, "video", "acme/video", "over", 10, 10*time.Millisecond, time.Minute), time.Minute)
	for _, j := range over {
		require.Equal(t, "flaky", j.Route, "steady is paused: %s", j.Routing.Why)
	}
	for _, s := range rs.sims {
		st := s.Stats()
		require.Zero(t, st.DuplicateCreates)
		require.LessOrEqual(t, st.MaxCreatesPerKey, 1)
	}
	require.Equal(t, 130, rs.sims["steady"].Stats().Creates+rs.sims["flaky"].Stats().Creates, "one create per job, on one route")
}

// With hedging, a job on steady that will not finish (10% never do) is hedged on flaky once it outlives what steady was learned to
// take: the job ends once — succeeded with the hedge's outputs, and its
// work on steady canceled — where the hedge succeeds, and a hedge whose
// job ended first is canceled. The figures against always one provider
// are logged for docs/concepts.md.
func TestAHedgedJobEndsOnce(t *testing.T) {
	t.Parallel()
	rs := startRouted(t, true, 8*time.Second, 0.1)
	// Learn both: steady first (flaky would otherwise take the jobs
	// while nothing is known).
	_, err := rs.env.Pauses.RateLimited(t.Context(), "flaky", 3*time.Second, "test: learn steady first")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rs.env.Pauses.Remaining("flaky") > 0 }, 5*time.Second, 10*time.Millisecond)
	rs.ended(t, rs.submit(t, "video", "acme/video", "warm-steady", 30, 10*time.Millisecond, 3*time.Second), time.Minute)
	rs.ended(t, rs.submit(t, "flaky", "acme/video-flaky", "warm-flaky", 30, 10*time.Millisecond, 3*time.Second), time.Minute)
	for _, s := range rs.sims {
		s.ResetStats()
	}

	ids := rs.submit(t, "video", "acme/video", "job", 80, 20*time.Millisecond, 3*time.Second)
	jobs := rs.ended(t, ids, time.Minute)
	f := rs.figures(jobs)
	t.Logf("model route, hedged: %v; the first job's choice: %s", f, jobs[0].Routing.Why)
	require.Positive(t, f.hedged, "the jobs on steady that never finish are hedged")
	require.Positive(t, f.hedgeWins)
	steadyCancels := rs.sims["steady"].Stats().CancelCalls
	require.GreaterOrEqual(t, steadyCancels, f.hedgeWins, "each job its hedge beat is canceled at steady")
	ends := rs.terminalEvents(t)
	ownEnds, hedgesCanceled := 0, 0
	for _, j := range jobs {
		require.Equal(t, 1, ends[j.ID], "job %s ends once", j.ID)
		if j.Routing.HedgedBy == "" {
			continue
		}
		h, err := rs.env.Jobs.Get(t.Context(), j.Routing.HedgedBy)
		require.NoError(t, err)
		require.Equal(t, j.ID, h.Routing.HedgeOf)
		require.NotEqual(t, j.Route, h.Route, "the hedge is on the other route")
		if j.DetectedBy == state.FromHedge {
			require.Equal(t, state.Succeeded, j.State)
			require.Equal(t, h.Outputs, j.Outputs, "the hedge's outputs")
			continue
		}
		// The job ended on its own: its hedge ends too — failed, canceled,
		// or, when both providers finished in the same moment, succeeded
		// at its provider before its poll saw the job's end (a hedge's
		// own record; the job keeps its own result either way); or, on a
		// loaded machine, expired: the job's deadline passed before the
		// hedge could be submitted, so nothing was made for it.
		require.Eventually(t, func() bool {
			h, err = rs.env.Jobs.Get(t.Context(), h.ID)
			return err == nil && h.State.Terminal()
		}, 10*time.Second, 20*time.Millisecond, "hedge %s ends", h.ID)
		require.Contains(t, []state.State{state.Failed, state.Canceled, state.Succeeded, state.Expired}, h.State, "hedge %s: %s", h.ID, h.Reason)
		if h.State == state.Expired {
			require.Empty(t, h.RemoteID, "hedge %s expired before it was submitted", h.ID)
		}
		if h.State == state.Canceled {
			hedgesCanceled++
		}
		ownEnds++
	}
	t.Logf("jobs that ended on their own: %d, their hedges canceled: %d", ownEnds, hedgesCanceled)
	// No route has a job twice: one create per idempotency key.
	for _, s := range rs.sims {
		require.LessOrEqual(t, s.Stats().MaxCreatesPerKey, 1)
	}

	// The same jobs always on one provider.
	for _, name := range []string{"steady", "flaky"} {
		for _, s := range rs.sims {
			s.ResetStats()
		}
		one := rs.ended(t, rs.submit(t, name, map[string]string{"steady": "acme/video", "flaky": "acme/video-flaky"}[name], "only-"+name, 80, 20*time.Millisecond, 3*time.Second), time.Minute)
		t.Logf("always %s: %v", name, rs.figures(one))
		if name == "steady" {
			require.Less(t, rs.figures(one).succeeded, f.succeeded, "hedging rescues steady's stuck jobs")
		}
	}
}
