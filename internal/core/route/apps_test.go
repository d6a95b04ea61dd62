package route_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// appGates are gates whose apps cap their jobs (studio: one running, one
// waiting), over a route that caps nothing of its own, and the apps'
// caps themselves.
func appGates(t *testing.T) (*route.Gates, *route.Gate, *budget.Apps) {
	t.Helper()
	_, _, js := natstest.JetStream(t)
	ctx := context.Background()
	res, err := events.Default.Setup(ctx, js, events.Options{})
	require.NoError(t, err)
	apps := budget.NewApps(js, events.Default, events.Options{}, map[string]budget.AppCap{"studio": {Running: 1, Waiting: 1}, "rival": {}})
	gates := route.NewGates(js, events.Default, res.Slots, events.Options{}, route.NewPauses(res.Routes, zerolog.Nop()), route.GateConfig{Apps: apps})
	t.Cleanup(gates.Close)
	r, err := route.New("r", &gateFake{}, config.Route{}, 0)
	require.NoError(t, err)
	g, err := gates.OpenSubmit(ctx, r)
	require.NoError(t, err)
	require.True(t, gates.AppsCapRunning(), "every route needs its admission queue")
	return gates, g, apps
}

// An app's max_running is a level of its jobs' running slots on every
// route: a second job of the app finds it full (its app's level, which
// AppFull tells apart from a route's), another app's job does not, and a
// job that takes its slots leaves its app's waiting jobs.
func TestAnAppsRunningCapIsALevelOfItsJobs(t *testing.T) {
	t.Parallel()
	_, g, apps := appGates(t)
	ctx := context.Background()

	require.NoError(t, apps.Wait(ctx, "studio", "a"))
	require.NoError(t, apps.Wait(ctx, "studio", "a"), "the same job again")
	var full *budget.WaitingFullError
	require.ErrorAs(t, apps.Wait(ctx, "studio", "b"), &full, "studio's max_waiting is 1")
	require.Equal(t, 1, full.Cap)
	require.NoError(t, apps.Wait(ctx, "rival", "x"), "rival caps nothing")

	held, lvl, err := g.Take(ctx, "a", "studio", nil)
	require.NoError(t, err)
	require.Empty(t, lvl)
	require.Equal(t, []state.Slot{{Scope: "app~studio", Seq: held[0].Seq}}, held)
	require.NoError(t, apps.Wait(ctx, "studio", "b"), "a took its running slot: it waits no more")

	_, lvl, err = g.Take(ctx, "b", "studio", nil)
	require.NoError(t, err)
	require.Equal(t, "app studio", lvl)
	require.True(t, route.AppFull(lvl))
	require.False(t, route.AppFull("route r"))
	require.False(t, route.AppFull("app_waiting studio"))
	_, lvl, err = g.Take(ctx, "x", "rival", nil)
	require.NoError(t, err)
	require.Empty(t, lvl, "another app's job")

	require.NoError(t, g.Free(ctx, "a", "studio", nil))
	_, lvl, err = g.Take(ctx, "b", "studio", nil)
	require.NoError(t, err)
	require.Empty(t, lvl)
}

// A process that dies holding an app's slots leaks none for long: the
// repair frees a running slot no record names and a waiting slot whose
// job was sent, ended or never recorded, and keeps those still held.
func TestAppSlotsOfADeadProcessAreRepaired(t *testing.T) {
	t.Parallel()
	gates, g, apps := appGates(t)
	ctx := context.Background()
	// "dead": admitted and sent by a process that died before recording
	// either; "waits": recorded waiting; "sent": recorded sent.
	require.NoError(t, apps.Wait(ctx, "studio", "waits"))
	_, lvl, err := g.Take(ctx, "dead", "studio", nil)
	require.NoError(t, err)
	require.Empty(t, lvl)
	records := map[string]*state.Job{
		"waits": {ID: "waits", App: "studio", State: state.Pending},
	}
	get := func(_ context.Context, id string) (*state.Job, error) {
		if j, ok := records[id]; ok {
			return j, nil
		}
		return nil, state.ErrNotFound
	}
	require.Empty(t, gates.Repair(ctx, get, time.Now(), time.Minute), "young slots are left to their writers")

	freed := func(rs []route.Repaired) map[string]int {
		out := map[string]int{}
		for _, r := range rs {
			require.NoError(t, r.Err)
			out[r.Level] = r.Freed
		}
		return out
	}
	later := time.Now().Add(2 * time.Minute)
	require.Equal(t, map[string]int{"app studio": 1}, freed(gates.Repair(ctx, get, later, time.Minute)),
		"the dead process's running slot; the waiting job keeps its place")
	held, lvl, err := g.Take(ctx, "next", "studio", nil)
	require.NoError(t, err)
	require.Empty(t, lvl, "the app's running slot is back")
	records["next"] = &state.Job{ID: "next", App: "studio", State: state.Running, RemoteID: "remote-2", Slots: held}

	records["waits"].RemoteID = "remote-1" // sent by a process that died before freeing its waiting slot
	require.Equal(t, map[string]int{"app_waiting studio": 1}, freed(gates.Repair(ctx, get, later, time.Minute)))
	require.NoError(t, apps.Wait(ctx, "studio", "another"))
}
