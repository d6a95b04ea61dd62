package simulate_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/internal/tools/simulate"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// t0 anchors the jobs' times.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// ended is a job the fleet finished, times in seconds from t0 (start < 0:
// the provider reported none).
type ended struct {
	id, route, model, config string
	submit, start, end       float64
	state                    state.State
	userCanceled             bool
}

// finish writes the jobs through the owner as the services do: tracked
// (accepted with a remote id), then ended with the provider's times.
// A job with state "" is left running.
func finish(t *testing.T, owner *jobs.Owner, all ...ended) {
	t.Helper()
	ctx := context.Background()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	for _, e := range all {
		j := &state.Job{ID: e.id, Route: e.route, Model: e.model, ConfigKey: e.config, RemoteID: "remote-" + e.id,
			State: state.Queued, Tracked: true, CreatedAt: at(e.submit), SubmittedAt: at(e.submit)}
		if e.userCanceled {
			j.CancelRequestedAt = at(e.end - 1)
		}
		j.Record(events.EventSubmitted, at(e.submit))
		_, created, err := owner.Intake().Accept(ctx, j)
		require.NoError(t, err)
		require.True(t, created, e.id)
		if e.state == "" {
			continue
		}
		r, err := owner.Intake().Read(ctx, e.id)
		require.NoError(t, err)
		obs := state.Observation{State: e.state, CompletedAt: at(e.end), At: at(e.end + 2), Source: state.FromPoll}
		if e.start >= 0 {
			obs.StartedAt = at(e.start)
		}
		_, err = owner.Intake().End(ctx, r, obs, jobs.Always)
		require.NoError(t, err)
	}
}

func fleetOwner(t *testing.T) *jobs.Owner {
	t.Helper()
	_, _, js := natstest.JetStream(t)
	res, err := events.Default.Setup(context.Background(), js, events.Options{})
	require.NoError(t, err)
	return jobs.New(events.Default, js, res, jobs.Config{})
}

// The fleet's finished jobs of a route become a trace in submit order
// (written in another order), with their configuration in the model's
// name, the queue time from the provider's start, and only the jobs that
// ended on their own; the trace reads back through ReadTrace unchanged.
func TestReadFleetMakesATraceOfTheRoutesFinishedJobs(t *testing.T) {
	t.Parallel()
	owner := fleetOwner(t)
	finish(t, owner,
		ended{id: "a", route: "r", model: "m", submit: 10, start: 14, end: 70, state: state.Succeeded},
		ended{id: "b", route: "r", model: "m", config: "720p", submit: 0, start: -1, end: 30, state: state.Failed},
		ended{id: "c", route: "r", model: "n", submit: 20, start: 21, end: 25, state: state.Canceled}, // by the provider
		ended{id: "d", route: "r", model: "m", submit: 30, start: 31, end: 90, state: state.Canceled, userCanceled: true},
		ended{id: "e", route: "r", model: "m", submit: 40, start: 41, end: 400, state: state.Expired},
		ended{id: "f", route: "r", model: "m", submit: 50, start: -1, end: 60, state: state.Lost},
		ended{id: "g", route: "other", model: "m", submit: 5, start: 6, end: 50, state: state.Succeeded},
		ended{id: "h", route: "r", model: "m", submit: 60},                                              // still running
		ended{id: "i", route: "r", model: "m", submit: 70, start: 69, end: 100, state: state.Succeeded}, // clocks apart
	)

	var calls [][2]int
	f, err := simulate.ReadFleet(context.Background(), owner, simulate.History{Route: "r"}, func(read, kept int) {
		calls = append(calls, [2]int{read, kept})
	})
	require.NoError(t, err)
	want := []simulate.Job{
		{Model: "m[720p]", Submit: 0, Queue: 0, Duration: 30, Outcome: "failed"},
		{Model: "m", Submit: 10, Queue: 4, Duration: 60, Outcome: "succeeded"},
		{Model: "n", Submit: 20, Queue: 1, Duration: 5, Outcome: "canceled"},
		{Model: "m", Submit: 70, Queue: 0, Duration: 30, Outcome: "succeeded"},
	}
	require.Equal(t, want, f.Jobs)
	require.Equal(t, t0, f.First)
	require.Equal(t, 9, f.Read)
	require.Equal(t, 3, f.Skipped, "user-canceled, expired and lost")
	require.Equal(t, [][2]int{{9, 7}}, calls, "once at the end: fewer records than ProgressEvery")

	var csv bytes.Buffer
	require.NoError(t, simulate.WriteTrace(&csv, f.Jobs))
	back, err := simulate.ReadTrace(&csv)
	require.NoError(t, err)
	require.Equal(t, want, back)

	// One model, every configuration of it; a window.
	f, err = simulate.ReadFleet(context.Background(), owner, simulate.History{Route: "r", Model: "m", Since: t0.Add(5 * time.Second)}, nil)
	require.NoError(t, err)
	require.Equal(t, []simulate.Job{
		{Model: "m", Submit: 0, Queue: 4, Duration: 60, Outcome: "succeeded"},
		{Model: "m", Submit: 60, Queue: 0, Duration: 30, Outcome: "succeeded"},
	}, f.Jobs)

	_, err = simulate.ReadFleet(context.Background(), owner, simulate.History{Route: "r", Model: "none"}, nil)
	require.ErrorContains(t, err, "no finished job of route r model none to learn from among 9 records")
}
