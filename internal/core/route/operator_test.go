package route_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
)

// An operator's pause holds every process's calls on the route — at most
// OperatorRecheck at a time, so a resume takes effect within it — survives
// a successful call (which clears the provider's pauses), leaves other
// routes alone, and ends for the whole fleet when resumed.
func TestAnOperatorPauseHoldsTheFleetUntilResumed(t *testing.T) {
	t.Parallel()
	ps := fleet(t, 2)
	ctx := context.Background()
	r, other := &route.Route{Name: "r"}, &route.Route{Name: "other"}

	got, err := ps[0].PauseRoute(ctx, "r", time.Time{}, "alice", "provider incident #42")
	require.NoError(t, err)
	require.Equal(t, route.PauseOperator, got.Kind)
	for _, p := range ps {
		require.Eventually(t, func() bool { return p.Hold(r) > 0 }, 5*time.Second, 5*time.Millisecond, "every process holds")
		hold := p.Hold(r)
		require.LessOrEqual(t, hold, route.OperatorRecheck+route.OperatorRecheck/10, "a call looks again within the recheck")
		require.GreaterOrEqual(t, hold, route.OperatorRecheck)
		require.Zero(t, p.Hold(other))
		op, ok := p.Operator("r")
		require.True(t, ok)
		require.Equal(t, "alice", op.By)
		require.Equal(t, "provider incident #42", op.Reason)
	}
	require.Zero(t, ps[1].After(ctx, r, "status", nil), "a call that succeeded")
	require.Positive(t, ps[1].Hold(r), "does not end an operator's pause")
	_, active := ps[1].Active("r")
	require.False(t, active, "nor is it the provider's pause")

	was, inForce, err := ps[1].ResumeRoute(ctx, "r")
	require.NoError(t, err)
	require.True(t, inForce)
	require.Equal(t, "alice", was.By)
	for _, p := range ps {
		require.Eventually(t, func() bool { return p.Hold(r) == 0 }, 5*time.Second, 5*time.Millisecond, "every process resumes")
	}
	_, inForce, err = ps[0].ResumeRoute(ctx, "r")
	require.NoError(t, err)
	require.False(t, inForce, "nothing to resume")
}

// An operator's pause and resume are recorded as the route's events, and
// a resume names who resumed, checked as a pause's who is.
func TestPauseAndResumeAreRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, _, js := natstest.JetStream(t)
	ns := events.Default
	res, err := ns.Setup(ctx, js, events.Options{MemoryStorage: true})
	require.NoError(t, err)
	p := route.NewPauses(res.Routes, zerolog.Nop())
	last := func() *events.RouteEvent {
		t.Helper()
		m, err := res.Events.GetLastMsgForSubject(ctx, ns.RouteEvent("r"))
		require.NoError(t, err)
		ev, err := events.DecodeRouteEvent(m.Data)
		require.NoError(t, err)
		return ev
	}
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	_, err = route.PauseAndRecord(ctx, p, js, ns, "r", until, "alice", "incident")
	require.NoError(t, err)
	ev := last()
	require.Equal(t, events.EventRoutePaused, ev.Type)
	require.Equal(t, "alice", ev.By)
	require.Equal(t, "incident", ev.Reason)
	require.True(t, until.Equal(ev.Until))

	_, _, err = route.ResumeAndRecord(ctx, p, js, ns, "r", "", "")
	require.ErrorContains(t, err, "resume: who acts must be named")
	was, inForce, err := route.ResumeAndRecord(ctx, p, js, ns, "r", "bob", "fixed")
	require.NoError(t, err)
	require.True(t, inForce)
	require.Equal(t, "alice", was.By)
	ev = last()
	require.Equal(t, events.EventRouteResumed, ev.Type)
	require.Equal(t, "bob", ev.By)
	require.True(t, ev.Until.IsZero())

	_, inForce, err = route.ResumeAndRecord(ctx, p, js, ns, "r", "bob", "")
	require.NoError(t, err)
	require.False(t, inForce)
	require.Equal(t, events.EventRouteResumed, last().Type, "nothing resumed: no event")
	info, err := res.Events.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(2), info.State.Msgs, "one event per action that changed something")
}

// A pause with an end holds until then (never longer than the recheck at a
// time), and a pause's who, why and end are checked.
func TestAnOperatorPauseWithAnEnd(t *testing.T) {
	t.Parallel()
	p := fleet(t, 1)[0]
	ctx := context.Background()
	_, err := p.PauseRoute(ctx, "r", time.Now().Add(2*time.Second), "bob", "")
	require.NoError(t, err)
	hold := p.Hold(&route.Route{Name: "r"})
	require.Greater(t, hold, time.Second)
	require.LessOrEqual(t, hold, 2*time.Second+200*time.Millisecond, "the pause's end, spread")

	for why, tc := range map[string]struct {
		until      time.Time
		by, reason string
		want       string
	}{
		"nobody":    {by: "", want: "who acts must be named"},
		"past":      {until: time.Now().Add(-time.Minute), by: "bob", want: "not in the future"},
		"long by":   {by: strings.Repeat("b", route.MaxPauseBy+1), want: "at most 128 bytes"},
		"long why":  {by: "bob", reason: strings.Repeat("r", route.MaxPauseReason+1), want: "at most 1024 bytes"},
		"not UTF-8": {by: "bob", reason: "\xff", want: "valid UTF-8"},
	} {
		_, err := p.PauseRoute(ctx, "r", tc.until, tc.by, tc.reason)
		require.ErrorContains(t, err, tc.want, why)
	}
}
