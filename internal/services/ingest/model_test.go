package ingest_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/ingest"
	"github.com/pollux-dev/pollux/internal/testkit/stack"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// knowing is a fleet's learned durations whose medians (seconds, by
// route) a test sets.
type knowing struct {
	mu     sync.Mutex
	median map[string]float64
}

func (k *knowing) set(route string, median float64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.median[route] = median
}

func (k *knowing) Lookup(route, _, _ string, _ float64) (total, run *schedule.Dist) {
	k.mu.Lock()
	m, ok := k.median[route]
	k.mu.Unlock()
	if !ok {
		return nil, nil
	}
	var d schedule.Dist
	for range 40 {
		d.Observe(time.Duration(m * float64(time.Second)))
	}
	return &d, nil
}
func (*knowing) Webhook(string) (float64, time.Duration)    { return 0, 0 }
func (*knowing) Failures(string, string) (float64, float64) { return 0, 0 }

// models runs ingest for routes "a" and "b" and model route "m" over them
// (the model "a-model" on a, "b-model" on b, no exploration).
type models struct {
	*rig
	a, b  *fake
	known *knowing
}

func startModels(t *testing.T) *models {
	t.Helper()
	fa, fb := newFake(), newFake()
	st := stack.New(t, stack.Config{
		Pollux: &config.Config{
			ModelRoutes: map[string]config.ModelRoute{"m": {Explore: -1, Members: []config.ModelRouteMember{
				{Route: "a", Model: "a-model"}, {Route: "b", Model: "b-model"}}}},
		},
		Adapters: map[string]provider.Adapter{"a": fa, "b": fb},
	})
	known := &knowing{median: map[string]float64{}}
	svc, err := ingest.New(ingest.Config{Routes: st.Routes, ModelRoutes: st.ModelRoutes, Learned: known, Options: st.Options,
		SweepInterval: 50 * time.Millisecond}, st.JS, st.NS, st.Res, st.Jobs.Intake(), st.Gates(route.GateConfig{CallTimeout: time.Second}))
	require.NoError(t, err)
	st.Go(svc.Run)
	return &models{rig: &rig{Stack: st, t: t}, a: fa, b: fb, known: known}
}

func (s *models) submitTo(route, id string) {
	s.t.Helper()
	s.Publish(s.NS.Submit(route), events.Submit{V: events.Version, ID: id, Model: "kling", Input: json.RawMessage(`{}`)})
}

// A submission to a model route is routed once, to the member that has
// learned to be faster (the configured order while nothing is learned),
// with the member's own model id; the record says where it went and why,
// a duplicate or a redelivery follows the choice made, and a cancel sent
// to the model route reaches the member.
func TestAModelRouteRoutesEachJobOnce(t *testing.T) {
	t.Parallel()
	s := startModels(t)

	s.submitTo("m", "first")
	j := s.Until("first", submitted)
	require.Equal(t, "a", j.Route, "nothing learned: the first member")
	require.Equal(t, "a-model", j.Model)
	require.NotNil(t, j.Routing)
	require.Equal(t, "m", j.Routing.Via)
	require.Contains(t, j.Routing.Why, "not learned yet")
	require.Len(t, j.Routing.Candidates, 2)

	s.known.set("a", 200)
	s.known.set("b", 50)
	s.submitTo("m", "second")
	j = s.Until("second", submitted)
	require.Equal(t, "b", j.Route, "b learned to be faster: %s", j.Routing.Why)
	require.Equal(t, "b-model", j.Model)

	// The first job again (a client's retry): b would be chosen now, but
	// the job is on a already: a duplicate, no create anywhere.
	s.submitTo("m", "first")
	s.intakeDone()
	require.Equal(t, 1, s.a.createsOf("first"))
	require.Zero(t, s.b.createsOf("first"))
	require.Equal(t, 1, s.b.createsOf("second"))

	s.Publish(s.NS.Cancel("m"), events.Cancel{V: events.Version, ID: "first"})
	j = s.Until("first", func(j *state.Job) bool { return j.State == state.Canceled })
	require.Equal(t, "a", j.Route)
	require.Equal(t, 1, s.a.cancels)

	// b pauses: the next job fails over to a.
	_, err := s.Pauses.RateLimited(s.Ctx(), "b", time.Minute, "429 from b")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Pauses.Remaining("b") > 0 }, 5*time.Second, 10*time.Millisecond)
	s.submitTo("m", "third")
	j = s.Until("third", submitted)
	require.Equal(t, "a", j.Route, "b is paused: %s", j.Routing.Why)
	require.Contains(t, j.Routing.Why, "paused")
}

// What a model route cannot take is rejected by name: a track request (a
// tracked job's route is known), an id used on another route, a cancel of
// a job that is not the model route's.
func TestAModelRouteRejectsWhatItCannotTake(t *testing.T) {
	t.Parallel()
	s := startModels(t)
	s.Publish(s.NS.Track("m"), events.Track{V: events.Version, ID: "tracked", RemoteID: "r1", Model: "kling"})
	require.Contains(t, s.rejection("m", "tracked").Rejection.Error, "model route")

	s.Publish(s.NS.Submit("a"), events.Submit{V: events.Version, ID: "direct", Model: "a-model", Input: json.RawMessage(`{}`)})
	s.Until("direct", submitted)
	s.submitTo("m", "direct")
	require.Contains(t, s.rejection("m", "direct").Rejection.Error, "already used by a job on route a")

	s.Publish(s.NS.Cancel("m"), events.Cancel{V: events.Version, ID: "direct"})
	require.Eventually(t, func() bool {
		msg, err := s.Res.Events.GetLastMsgForSubject(s.Ctx(), s.NS.Event("m", "direct"))
		if err != nil {
			return false
		}
		ev, err := events.DecodeEvent(msg.Data)
		return err == nil && ev.Rejection != nil && strings.Contains(ev.Rejection.Error, "on route a, not m")
	}, 20*time.Second, 10*time.Millisecond, "the cancel of another route's job is rejected")
	s.Publish(s.NS.Cancel("m"), events.Cancel{V: events.Version, ID: "nobody"})
	require.Contains(t, s.rejection("m", "nobody").Rejection.Error, "no such job")
	// A hedge no poller asked for: the job is not marked hedged by it.
	s.Publish(s.NS.Submit("b"), events.Submit{V: events.Version, ID: "direct-h", Model: "b-model", Input: json.RawMessage(`{}`), HedgeOf: "direct"})
	require.Contains(t, s.rejection("b", "direct-h").Rejection.Error, "hedge_of: job direct is not hedged by direct-h")
	s.intakeDone() // and the sweep of unserved routes left the model route alone
	require.Equal(t, 1, s.a.createsOf("direct"))
	require.Zero(t, s.b.createsOf("direct-h"))
}

// A submission to a model route whose job ended before ingest took it —
// the front door withdrew it, its record on the model route — makes
// nothing, and is no rejection.
func TestAModelRoutesWithdrawnJobMakesNothing(t *testing.T) {
	t.Parallel()
	s := startModels(t)
	_, created, err := s.Jobs.Withdraw(s.Ctx(), &state.Job{ID: "withdrawn", Route: "m", Model: "kling", Routing: &state.Routing{Via: "m"}},
		"its create was answered 503", "app")
	require.NoError(t, err)
	require.True(t, created)
	s.submitTo("m", "withdrawn")
	s.intakeDone()
	require.Zero(t, s.a.createsOf("withdrawn")+s.b.createsOf("withdrawn"))
	msg, err := s.Res.Events.GetLastMsgForSubject(s.Ctx(), s.NS.Event("m", "withdrawn"))
	require.NoError(t, err)
	ev, err := events.DecodeEvent(msg.Data)
	require.NoError(t, err)
	require.Equal(t, events.EventCanceled, ev.Type, "no rejection follows its end")
	require.Equal(t, state.Canceled, s.Job("withdrawn").State)
}
