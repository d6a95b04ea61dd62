package route_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/pkg/schedule"
)

// fleetKnows is what a fleet learned of each route's model: durations
// (median seconds, all within ±5%) and failure rates.
type fleetKnows struct {
	median   map[string]float64
	failures map[string]float64
}

func (f fleetKnows) Lookup(route, _, _ string, _ float64) (total, run *schedule.Dist) {
	m, ok := f.median[route]
	if !ok {
		return nil, nil
	}
	return around(m), nil
}

var dists sync.Map // median → *schedule.Dist

// around is a Dist of durations within ±5% of median seconds.
func around(median float64) *schedule.Dist {
	if d, ok := dists.Load(median); ok {
		return d.(*schedule.Dist)
	}
	r := rand.New(rand.NewPCG(1, 1))
	var d schedule.Dist
	for range 200 {
		d.Observe(time.Duration(median * (0.95 + 0.1*r.Float64()) * float64(time.Second)))
	}
	dists.Store(median, &d)
	return &d
}
func (fleetKnows) Webhook(string) (float64, time.Duration) { return 0, 0 }
func (f fleetKnows) Failures(route, _ string) (float64, float64) {
	return f.failures[route], 100
}

func modelRoute(t *testing.T, explore float64) *route.ModelRoute {
	t.Helper()
	c := &config.Config{
		Routes: map[string]config.Route{"atlas": {}, "kling": {}},
		ModelRoutes: map[string]config.ModelRoute{"kling-v2": {Explore: explore, Members: []config.ModelRouteMember{
			{Route: "atlas", Model: "kwaivgi/kling-v2"}, {Route: "kling", Model: "kling-v2"},
		}}},
	}
	routes := map[string]*route.Route{"atlas": {Name: "atlas"}, "kling": {Name: "kling"}}
	mrs, err := route.BuildModels(c, routes)
	require.NoError(t, err)
	return mrs["kling-v2"]
}

func chosen(ch route.Choice) string { return ch.Ranked[0].Route.Name }

func TestAModelRouteChoosesByWhatItLearned(t *testing.T) {
	t.Parallel()
	mr := modelRoute(t, -1)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	choose := func(f fleetKnows, deadline time.Time, states ...route.MemberState) route.Choice {
		return mr.Choose("job", "", 0, now, deadline, 0, f, states)
	}

	ch := choose(fleetKnows{}, time.Time{})
	require.Equal(t, "atlas", chosen(ch), "nothing learned: the configured order")
	require.Equal(t, "kwaivgi/kling-v2", ch.Ranked[0].Model, "the model's id on the member")
	require.Contains(t, ch.Routing.Why, "not learned yet")
	require.Equal(t, "kling-v2", ch.Routing.Via)

	slow := fleetKnows{median: map[string]float64{"atlas": 200, "kling": 60}}
	ch = choose(slow, time.Time{})
	require.Equal(t, "kling", chosen(ch), "the faster")
	require.Equal(t, "atlas", ch.Ranked[1].Route.Name)
	require.InDelta(t, 63, time.Duration(ch.Routing.Candidates[0].P90).Seconds(), 2)

	failing := fleetKnows{median: map[string]float64{"atlas": 80, "kling": 60}, failures: map[string]float64{"kling": 0.3}}
	ch = choose(failing, time.Time{})
	require.Equal(t, "atlas", chosen(ch), "60 s at 30%% failures is ~90 s to a success, more than 80 s: %s", ch.Routing.Why)
	require.Contains(t, ch.Routing.Why, "30% failed")

	require.Equal(t, "kling", chosen(choose(failing, time.Time{}, route.MemberState{Waiting: true})), "jobs wait for atlas's slots")
	ch = choose(slow, time.Time{}, route.MemberState{}, route.MemberState{Paused: true})
	require.Equal(t, "atlas", chosen(ch), "the faster one is paused: fail over")
	require.True(t, ch.Routing.Candidates[1].Paused)
	ch = choose(slow, time.Time{}, route.MemberState{Paused: true}, route.MemberState{Paused: true})
	require.Equal(t, "kling", chosen(ch), "all paused: the best anyway, to wait there")
	require.Contains(t, ch.Routing.Why, "every member is paused")

	// The deadline: atlas is faster to a success on average but will
	// likely end after it; kling, failing often, ends in time.
	tight := fleetKnows{median: map[string]float64{"atlas": 25, "kling": 15}, failures: map[string]float64{"kling": 0.6}}
	ch = choose(tight, time.Time{})
	require.Equal(t, "atlas", chosen(ch), "no deadline: the expected time to a success")
	ch = choose(tight, now.Add(20*time.Second))
	require.Equal(t, "kling", chosen(ch), "atlas will miss the deadline: %s", ch.Routing.Why)
	require.InDelta(t, 0, *ch.Routing.Candidates[1].OnTime, 0.01)
	require.InDelta(t, 1, *ch.Routing.Candidates[0].OnTime, 0.01)
}

// A share of jobs, picked by their id (the same for a redelivery and in
// every process), goes to the second-ranked member so that what is learned
// of it stays current.
func TestAModelRouteExplores(t *testing.T) {
	t.Parallel()
	mr := modelRoute(t, 0)
	slow := fleetKnows{median: map[string]float64{"atlas": 200, "kling": 60}}
	now := time.Now()
	explored := 0
	const n = 4000
	for i := range n {
		id := fmt.Sprintf("job-%d", i)
		ch := mr.Choose(id, "", 0, now, time.Time{}, 0, slow, nil)
		require.Equal(t, chosen(ch), chosen(mr.Choose(id, "", 0, now, time.Time{}, 0, slow, nil)), "one id, one choice")
		if chosen(ch) == "atlas" {
			explored++
			require.Contains(t, ch.Routing.Why, "explored")
		}
	}
	require.InDelta(t, route.DefaultExplore, float64(explored)/n, 0.015)

	ch := mr.Choose("job-0", "", 0, now, time.Time{}, 0, slow, []route.MemberState{{Paused: true}, {}})
	require.Equal(t, "kling", chosen(ch), "never explore a paused member")
}
