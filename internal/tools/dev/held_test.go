package dev_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// While a route is paused its submissions are held: listed as pending with
// why they wait, counted on the route, and a cancel ends one at once —
// after the resume it is never created, while the one not canceled is.
func TestAPausedRoutesSubmissionsAreHeldListedAndCancelable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _ := startStack(t, dev.StackConfig{
		Sim:        sim.Config{Seed: 5, TimeScale: 1, Default: sim.Model{QueueMedian: sim.Duration(50 * time.Millisecond), RunMedian: sim.Duration(100 * time.Millisecond)}},
		NoWebhooks: true,
	})
	// The messages held come back within this once the route resumes.
	st.Env.Pauses.SetRecheck(300 * time.Millisecond)
	do := func(method, path, body string) (int, []byte) { return call(t, st, method, path, body) }
	code, b := do(http.MethodPost, "/v1/routes/"+dev.RouteName+"/pause", `{"reason":"incident 7"}`)
	require.Equal(t, http.StatusOK, code, "%s", b)
	require.Eventually(t, func() bool { return st.Env.Pauses.Why(st.Env.Routes[dev.RouteName]) != "" }, 10*time.Second, 10*time.Millisecond)

	for _, id := range []string{"held-1", "held-2"} {
		code, b := do(http.MethodPost, "/v1/jobs", `{"v":1,"route":"`+dev.RouteName+`","id":"`+id+`","model":"m/fast","input":{}}`)
		require.Equal(t, http.StatusAccepted, code, "%s", b)
	}
	// Listed as pending, with why they wait, and counted on the route.
	var list frontdoor.JobList
	require.Eventually(t, func() bool {
		code, b := do(http.MethodGet, "/v1/jobs?state=pending", "")
		list = frontdoor.JobList{}
		return code == http.StatusOK && json.Unmarshal(b, &list) == nil && len(list.Jobs) == 2
	}, 20*time.Second, 20*time.Millisecond, "the held jobs are listed")
	for _, e := range list.Jobs {
		require.Equal(t, state.Pending, e.State)
		require.Contains(t, e.WaitingFor, "route paused by ")
		require.Contains(t, e.WaitingFor, ": incident 7")
	}
	code, b = do(http.MethodGet, "/v1/routes", "")
	require.Equal(t, http.StatusOK, code, "%s", b)
	var routes frontdoor.Routes
	require.NoError(t, json.Unmarshal(b, &routes))
	require.Len(t, routes.Routes, 1)
	require.Equal(t, map[string]int{list.Jobs[0].WaitingFor: 2}, routes.Routes[0].Waiting, "held jobs counted by why they wait")

	// The cancel ends the held job at once: no provider call is needed.
	code, b = do(http.MethodPost, "/v1/jobs/held-1/cancel", `{"reason":"not now"}`)
	require.Equal(t, http.StatusAccepted, code, "%s", b)
	require.Eventually(t, func() bool {
		j, err := st.Env.Jobs.Get(ctx, "held-1")
		return err == nil && j.State == state.Canceled
	}, 20*time.Second, 20*time.Millisecond, "the held job is canceled while the route is paused")
	code, b = do(http.MethodPost, "/v1/routes/"+dev.RouteName+"/resume", `{}`)
	require.Equal(t, http.StatusOK, code, "%s", b)

	// The other is created after the resume; the canceled one never is.
	require.Eventually(t, func() bool {
		j, err := st.Env.Jobs.Get(ctx, "held-2")
		return err == nil && j.State == state.Succeeded
	}, 30*time.Second, 20*time.Millisecond, "the held job not canceled is submitted after the resume")
	j, err := st.Env.Jobs.Get(ctx, "held-1")
	require.NoError(t, err)
	require.Equal(t, state.Canceled, j.State)
	require.Empty(t, j.RemoteID)
	require.Equal(t, 1, st.Sim.Stats().Creates, "only the job not canceled reached the provider")
	require.Eventually(t, func() bool {
		info, err := st.Env.Res.Intake.Info(ctx)
		return err == nil && info.State.Msgs == 0
	}, 20*time.Second, 20*time.Millisecond, "the held submissions' messages are done")
	require.Equal(t, 1, st.Sim.Stats().Creates)
}

// A cancel of a held job takes effect at once however many submissions
// the paused route holds. The route's intake consumer has at most 1,024
// messages out, here all held submissions: a cancel message would wait
// behind them until the pause ended, and then race its job's create. The
// front door records the request first, which ends a job that never
// reached the provider in the same write. Red without it: the job stays
// pending while the route is paused.
func TestACancelOfAHeldJobAtTheIntakeCapTakesEffectAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, js := startStack(t, dev.StackConfig{
		Sim:        sim.Config{Seed: 6, TimeScale: 1, Default: sim.Model{QueueMedian: sim.Duration(50 * time.Millisecond), RunMedian: sim.Duration(100 * time.Millisecond)}},
		NoWebhooks: true,
	})
	// The held messages come back this often: seldom enough that 1,024
	// of them are little work on a loaded machine.
	st.Env.Pauses.SetRecheck(3 * time.Second)
	post := func(path, body string) int {
		code, _ := call(t, st, http.MethodPost, path, body)
		return code
	}
	require.Equal(t, http.StatusOK, post("/v1/routes/"+dev.RouteName+"/pause", `{"reason":"incident 8"}`))
	require.Eventually(t, func() bool { return st.Env.Pauses.Why(st.Env.Routes[dev.RouteName]) != "" }, 10*time.Second, 10*time.Millisecond)

	const n = 1040 // beyond the intake consumer's 1,024 out
	id := func(i int) string { return fmt.Sprintf("cap-%04d", i) }
	natstest.PublishMany(t, js, n, func(i int) (string, []byte) {
		b, err := json.Marshal(events.Submit{V: events.Version, ID: id(i), Model: "m/fast", Input: json.RawMessage(`{}`)})
		require.NoError(t, err)
		return st.Env.NS.Submit(dev.RouteName), b
	})
	c, err := st.Env.Res.Intake.Consumer(ctx, st.Env.NS.IngestConsumer(dev.RouteName))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ci, err := c.Info(ctx)
		return err == nil && ci.NumAckPending == 1024
	}, 90*time.Second, 50*time.Millisecond, "the route's intake holds 1,024 submissions")
	const target = 7
	require.Eventually(t, func() bool {
		j, err := st.Env.Jobs.Get(ctx, id(target))
		return err == nil && j.WaitingFor != ""
	}, 20*time.Second, 20*time.Millisecond, "the job is held, and listed")

	require.Equal(t, http.StatusAccepted, post("/v1/jobs/"+id(target)+"/cancel", `{"reason":"not now"}`))
	j, err := st.Env.Jobs.Get(ctx, id(target))
	require.NoError(t, err)
	require.Equal(t, state.Canceled, j.State, "canceled by the time the cancel is answered, the route still paused")
	require.Equal(t, "not now", j.Reason)

	require.Equal(t, http.StatusOK, post("/v1/routes/"+dev.RouteName+"/resume", `{}`))
	require.Eventually(t, func() bool {
		j, err := st.Env.Jobs.Get(ctx, id(target+1))
		return err == nil && j.RemoteID != ""
	}, 60*time.Second, 50*time.Millisecond, "the held jobs are created after the resume")
	require.Eventually(t, func() bool {
		ci, err := c.Info(ctx)
		return err == nil && ci.NumAckPending == 0 && ci.NumPending == 0
	}, 120*time.Second, 100*time.Millisecond, "every held submission is handled")
	j, err = st.Env.Jobs.Get(ctx, id(target))
	require.NoError(t, err)
	require.Equal(t, state.Canceled, j.State)
	require.Empty(t, j.RemoteID, "the canceled job was never created")
	require.Equal(t, n-1, st.Sim.Stats().Creates, "every other held job was created once")
}

// call makes a JSON request of the stack's front door and returns the
// status and body.
func call(t *testing.T, st *dev.Stack, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, st.HTTPURL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}
