package report_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/learn"
	"github.com/pollux-dev/pollux/internal/edge/index"
	"github.com/pollux-dev/pollux/internal/edge/report"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// fleet is a namespace on an embedded server holding job records and
// their terminal events, as the services leave them.
type fleet struct {
	t     *testing.T
	res   *events.Resources
	owner *jobs.Owner
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	_, _, js := natstest.JetStream(t)
	res, err := events.Default.Setup(t.Context(), js, events.Options{})
	require.NoError(t, err)
	return &fleet{t: t, res: res, owner: jobs.New(events.Default, js, res, jobs.Config{})}
}

// end stores a job ended in st (told by by, after polls polls) and
// publishes its terminal event.
func (f *fleet) end(route, id string, st state.State, by state.Source, polls int, webhook bool) {
	f.t.Helper()
	now := time.Now().UTC()
	j := &state.Job{ID: id, Route: route, Model: "m", State: st, CreatedAt: now.Add(-time.Minute), UpdatedAt: now,
		CompletedAt: now.Add(-2 * time.Second), DetectedAt: now, DetectedBy: by, Polls: polls, WebhookExpected: webhook}
	b, err := json.Marshal(j)
	require.NoError(f.t, err)
	_, err = f.res.Jobs.Put(f.t.Context(), id, b)
	require.NoError(f.t, err)
	ev := &events.Event{V: events.Version, Type: string(st), Seq: 2, Time: now, Route: route, JobID: id, State: st, Job: j}
	eb, err := ev.Encode()
	require.NoError(f.t, err)
	_, err = f.res.JS.Publish(f.t.Context(), events.Default.Event(route, id), eb)
	require.NoError(f.t, err)
}

// The console (the index's activity, GET /v1/routes) and `pollux stats`
// (the report) count the same completions, polls per completion and
// webhook coverage of the same fleet: one definition, state.Tally. A lost,
// canceled or expired job is ended, not completed: its polls count, it
// does not.
func TestStatsAndConsoleAgree(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	for _, j := range []struct {
		route, id string
		st        state.State
		by        state.Source
		polls     int
		webhook   bool
	}{
		{"hooks", "a1", state.Succeeded, state.FromWebhook, 1, true},
		{"hooks", "a2", state.Succeeded, state.FromWebhook, 2, true},
		{"hooks", "a3", state.Failed, state.FromPoll, 4, true}, // a missing webhook
		{"hooks", "a4", state.Succeeded, state.FromWebhook, 0, true},
		{"hooks", "a5", state.Canceled, state.FromCancel, 3, true},
		{"hooks", "a6", state.Lost, state.FromPollux, 9, true},
		{"hooks", "a7", state.Expired, state.FromPollux, 5, true},
		{"polls", "b1", state.Succeeded, state.FromPoll, 6, false},
		{"polls", "b2", state.Failed, state.FromPoll, 2, false},
		{"polls", "b3", state.Lost, state.FromPollux, 7, false},
	} {
		f.end(j.route, j.id, j.st, j.by, j.polls, j.webhook)
	}
	x, err := index.New(index.Config{}, f.res.JS, events.Default, f.res)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- x.Run(ctx, ready) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the index did not catch up")
	}

	r, err := report.Build(t.Context(), f.owner, f.res)
	require.NoError(t, err)
	require.Len(t, r.Routes, 2)
	for _, rt := range r.Routes {
		a := x.Activity(rt.Route)
		require.Equal(t, rt.Completions, a.Completions, rt.Route)
		require.Equal(t, rt.Ended, a.Ended, rt.Route)
		require.Equal(t, rt.WebhookExpected, a.WebhookExpected, rt.Route)
		require.InDelta(t, rt.WebhookCoverage, a.WebhookCoverage, 1e-3, rt.Route)
		require.InDelta(t, rt.PollsPerCompletion, a.PollsPerCompletion, 1e-2, rt.Route)
	}
	hooks := r.Routes[0]
	require.Equal(t, "hooks", hooks.Route)
	require.Equal(t, 4, hooks.Completions, "canceled, lost and expired jobs are not completions")
	require.Equal(t, 7, hooks.Ended)
	require.Equal(t, 0.75, hooks.WebhookCoverage, "3 of the 4 completions by webhook")
	require.Equal(t, 1, hooks.ReconciliationCatches)
	require.Equal(t, 24.0/4, hooks.PollsPerCompletion, "every ended job's polls over the completions, not over the 7 jobs ended")
	polls := r.Routes[1]
	require.Equal(t, 2, polls.Completions)
	require.Zero(t, polls.WebhookExpected, "a poll-only route: no coverage to speak of")
	require.Equal(t, 15.0/2, polls.PollsPerCompletion, "the lost job's polls count, the job does not")
}

// `pollux stats` lists what is learned of each model, and nothing for the
// route-wide records the stats bucket also holds (the webhooks'
// reliability, the queue's rate), which name no model.
func TestStatsListsOnlyModels(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	var d schedule.Dist
	for range 30 {
		d.Observe(10 * time.Second)
	}
	for key, v := range map[string]any{
		learn.Key("r", "owner/model", ""): learn.Record{Route: "r", Model: "owner/model", Total: d},
		learn.WebhookKey("r"):             learn.WebhookRecord{Route: "r", Scope: learn.ScopeWebhook, Delivered: 12, Late: d},
		learn.QueueKey("r"):               learn.QueueRecord{Route: "r", Scope: learn.ScopeQueue, Moved: 10, Seconds: 5},
	} {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		_, err = f.res.Stats.Put(t.Context(), key, b)
		require.NoError(t, err)
	}
	r, err := report.Build(t.Context(), f.owner, f.res)
	require.NoError(t, err)
	require.Len(t, r.Routes, 1)
	require.Len(t, r.Routes[0].Learned, 1, "the webhook record is no model")
	require.Equal(t, "owner/model", r.Routes[0].Learned[0].Model)
}
