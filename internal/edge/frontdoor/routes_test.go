package frontdoor_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/census"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// withCensus answers GET /v1/routes from a census of both routes.
func withCensus(d *door, cfg *frontdoor.Config) {
	cfg.Census = func(ctx context.Context) (*census.Snapshot, error) {
		return census.Take(ctx, d.ns, d.res, []string{route, "other"})
	}
}

// all applies every option.
func all(opts ...func(*door, *frontdoor.Config)) func(*door, *frontdoor.Config) {
	return func(d *door, cfg *frontdoor.Config) {
		for _, o := range opts {
			o(d, cfg)
		}
	}
}

// lastRouteEvent returns the route's latest route event.
func (d *door) lastRouteEvent(t *testing.T, name string) events.RouteEvent {
	t.Helper()
	m, err := d.res.Events.GetLastMsgForSubject(context.Background(), d.ns.RouteEvent(name))
	require.NoError(t, err)
	var ev events.RouteEvent
	require.NoError(t, json.Unmarshal(m.Data, &ev))
	return ev
}

// A pause and a resume through the front door are an operator's, recorded
// as the route's events with by = the token's name; GET /v1/routes shows
// the pause, the census and the index's counts and activity.
func TestPauseAndResumeRecorded(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.LoadTokens(tokensFile(t, tokenAlice+" admin name=alice", tokenBob+" admin"))
	require.NoError(t, err)
	d := setupWith(t, frontdoor.Config{Tokens: tokens}, all(withPauses, withIndex, withCensus))
	alice := map[string]string{"Authorization": "Bearer " + tokenAlice}
	d.event(t, state.Job{ID: "job-1", Route: route, Model: "m", State: state.Running, CreatedAt: time.Now()}, 1)
	require.Eventually(t, func() bool { n, _ := d.index.Size(); return n == 1 }, 10*time.Second, 10*time.Millisecond)

	before := time.Now()
	r := d.do(t, http.MethodPost, "/v1/routes/sim/pause", `{"reason":"provider incident","for":"30m"}`, alice)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	var paused frontdoor.RouteAction
	require.NoError(t, json.Unmarshal(r.raw, &paused))
	require.Equal(t, "sim", paused.Route)
	require.Equal(t, "paused", paused.State)
	require.Equal(t, frontdoor.PauseKindOperator, paused.Pause.Kind)
	require.Equal(t, "alice", paused.Pause.By)
	require.Equal(t, "provider incident", paused.Pause.Reason)
	require.WithinDuration(t, before.Add(30*time.Minute), *paused.Pause.Until, 5*time.Second)
	ev := d.lastRouteEvent(t, "sim")
	require.Equal(t, events.EventRoutePaused, ev.Type)
	require.Equal(t, "alice", ev.By)
	require.Equal(t, "provider incident", ev.Reason)

	r = d.do(t, http.MethodGet, "/v1/routes", "", alice)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	var rs frontdoor.Routes
	require.NoError(t, json.Unmarshal(r.raw, &rs))
	require.Len(t, rs.Routes, 2)
	sim, other := rs.Routes[0], rs.Routes[1]
	require.Equal(t, "sim", sim.Name)
	require.Equal(t, "paused", sim.State)
	require.True(t, strings.HasPrefix(sim.StateText, "paused by alice until "), sim.StateText)
	require.True(t, strings.HasSuffix(sim.StateText, ": provider incident"), sim.StateText)
	require.Equal(t, "alice", sim.Pause.By)
	require.Len(t, sim.Pauses, 1)
	require.Equal(t, map[state.State]int{state.Running: 1}, sim.Counts)
	require.Len(t, sim.Activity.Minutes, 60)
	require.Equal(t, "other", other.Name)
	require.Equal(t, "running", other.State)
	require.Equal(t, "running", other.StateText)
	require.Nil(t, other.Pause)
	require.Empty(t, other.Pauses)
	require.NotNil(t, rs.Activity)
	require.Eventually(t, func() bool {
		r := d.do(t, http.MethodGet, "/v1/routes", "", alice)
		var rs frontdoor.Routes
		require.NoError(t, json.Unmarshal(r.raw, &rs))
		evs := rs.Routes[0].Events
		return len(evs) == 1 && evs[0].Type == events.EventRoutePaused && evs[0].By == "alice"
	}, 10*time.Second, 20*time.Millisecond, "the route's events, from the index")

	// A token without a name acts as "api".
	r = d.do(t, http.MethodPost, "/v1/routes/sim/resume", `{"reason":"over"}`, map[string]string{"Authorization": "Bearer " + tokenBob})
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	var resumed frontdoor.RouteAction
	require.NoError(t, json.Unmarshal(r.raw, &resumed))
	require.Equal(t, "running", resumed.State)
	require.Equal(t, "alice", resumed.Pause.By, "the pause that ended")
	ev = d.lastRouteEvent(t, "sim")
	require.Equal(t, events.EventRouteResumed, ev.Type)
	require.Equal(t, "api", ev.By)
	require.Equal(t, "over", ev.Reason)

	r = d.do(t, http.MethodPost, "/v1/routes/sim/resume", ``, alice)
	requireError(t, r, http.StatusConflict, frontdoor.CodeNotPaused, "")
	r = d.do(t, http.MethodGet, "/v1/routes", "", alice)
	require.NoError(t, json.Unmarshal(r.raw, &rs))
	require.Equal(t, "running", rs.Routes[0].State)

	// Until a time, and until resumed.
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	r = d.do(t, http.MethodPost, "/v1/routes/other/pause", `{"until":"`+until.Format(time.RFC3339)+`"}`, alice)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	require.NoError(t, json.Unmarshal(r.raw, &paused))
	require.True(t, until.Equal(*paused.Pause.Until))
	r = d.do(t, http.MethodPost, "/v1/routes/sim/pause", ``, alice)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	paused = frontdoor.RouteAction{}
	require.NoError(t, json.Unmarshal(r.raw, &paused))
	require.Nil(t, paused.Pause.Until, "until resumed")
}

// Pause and resume requests are checked before anything is written.
func TestPauseRefused(t *testing.T) {
	t.Parallel()
	d := setupWith(t, frontdoor.Config{}, withPauses)
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		path, body string
		status     int
		code       frontdoor.Code
		field      string
	}{
		{"/v1/routes/sim/pause", `{"for":"-1m"}`, 400, frontdoor.CodeInvalidField, "for"},
		{"/v1/routes/sim/pause", `{"for":"soon"}`, 400, frontdoor.CodeInvalidField, "for"},
		{"/v1/routes/sim/pause", `{"for":"1m","until":"` + past + `"}`, 400, frontdoor.CodeInvalidField, "for"},
		{"/v1/routes/sim/pause", `{"until":"` + past + `"}`, 400, frontdoor.CodeInvalidField, "until"},
		{"/v1/routes/sim/pause", `{"until":"tomorrow"}`, 400, frontdoor.CodeInvalidField, "until"},
		{"/v1/routes/sim/pause", `{"reason":7}`, 400, frontdoor.CodeInvalidField, "reason"},
		{"/v1/routes/sim/pause", `{"reason":"` + strings.Repeat("x", 1025) + `"}`, 400, frontdoor.CodeInvalidField, "reason"},
		{"/v1/routes/sim/pause", `[`, 400, frontdoor.CodeInvalidBody, ""},
		{"/v1/routes/nowhere/pause", `{}`, 404, frontdoor.CodeUnknownRoute, "name"},
		{"/v1/routes/nowhere/resume", `{}`, 404, frontdoor.CodeUnknownRoute, "name"},
		{"/v1/routes/sim/resume", `{}`, 409, frontdoor.CodeNotPaused, ""},
	} {
		r := d.do(t, http.MethodPost, tc.path, tc.body, nil)
		requireError(t, r, tc.status, tc.code, tc.field)
	}
	_, err := d.res.Routes.Get(context.Background(), "operator.sim")
	require.Error(t, err, "nothing was paused")

	bare := setup(t, frontdoor.Config{})
	r := bare.do(t, http.MethodPost, "/v1/routes/sim/pause", `{}`, nil)
	requireError(t, r, http.StatusServiceUnavailable, frontdoor.CodeUnavailable, "")
	r = bare.do(t, http.MethodGet, "/v1/routes", "", nil)
	requireError(t, r, http.StatusServiceUnavailable, frontdoor.CodeUnavailable, "")
}

// learned is a distribution of durations spread evenly over 10-40 s,
// observed in a shuffled order (recent observations weigh most).
func learned() *schedule.Dist {
	var d schedule.Dist
	for i := range 200 {
		d.Observe(10*time.Second + time.Duration(i*77%200)*30*time.Second/200)
	}
	return &d
}

// withLearned gives the front door a learned model owner/model on sim.
func withLearned(d *door, cfg *frontdoor.Config) {
	dist := learned()
	var young schedule.Dist // 8 jobs of about 2 s: not enough to follow
	for i := range 8 {
		young.Observe(1800*time.Millisecond + time.Duration(i)*50*time.Millisecond)
	}
	cfg.Learned = func(rt, model, _ string) (*schedule.Dist, *schedule.Dist) {
		switch {
		case rt == route && model == "owner/model":
			return dist, nil
		case rt == route && model == "owner/young":
			return &young, nil
		}
		return nil, nil
	}
	cfg.Policies = map[string]schedule.Policy{route: {MaxDelay: 30 * time.Second}}
}

// A model's page: its learned quantiles and histogram, the schedule's poll
// plan, and what it costs against a fixed interval with the same mean
// delay and the SDK's 0.5 s.
func TestModel(t *testing.T) {
	t.Parallel()
	d := setupWith(t, frontdoor.Config{}, all(withIndex, withLearned))
	r := d.do(t, http.MethodGet, "/v1/routes/sim/models/owner%2Fmodel", "", nil)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	var m frontdoor.Model
	require.NoError(t, json.Unmarshal(r.raw, &m))
	require.Equal(t, "sim", m.Route)
	require.Equal(t, "owner/model", m.Model)
	require.True(t, m.Learned)
	require.EqualValues(t, 200, m.Observed)
	require.Len(t, m.Quantiles, 8)
	for i := 1; i < len(m.Quantiles); i++ {
		require.Greater(t, m.Quantiles[i].S, m.Quantiles[i-1].S)
	}
	require.InDelta(t, 25, m.Quantiles[3].S, 2.5, "the median of 10-40 s")
	share := 0.0
	for _, b := range m.Histogram {
		require.Greater(t, b.HiS, b.LoS)
		share += b.Share
	}
	require.InDelta(t, 0.99, share, 0.02)
	require.Len(t, m.Plan.PollsS, 20)
	for i := 1; i < len(m.Plan.PollsS); i++ {
		require.Greater(t, m.Plan.PollsS[i], m.Plan.PollsS[i-1])
	}
	require.Greater(t, m.Plan.PollsS[0], 5.0, "no job ends before 10 s: the plan waits")
	require.Equal(t, frontdoor.PlanLearned, m.Plan.Source)
	require.Nil(t, m.LearnedPlan, "the plan in force is the learned one")
	c := m.Comparison
	require.Positive(t, c.Pollux.PollsPerJob)
	require.InDelta(t, c.Pollux.MeanDelayS, c.Fixed.MeanDelayS, 1e-9)
	require.Greater(t, c.Fixed.PollsPerJob, c.Pollux.PollsPerJob, "a fixed interval as fast polls more")
	require.Greater(t, c.SavingVsFixed, 1.0)
	require.InDelta(t, 0.5, c.SDK.IntervalS, 1e-9)
	require.Greater(t, c.SDK.PollsPerJob, 40.0, "20-80 polls at 0.5 s for 10-40 s")
	require.InDelta(t, c.SDK.PollsPerJob/c.Pollux.PollsPerJob, c.SavingVsSDK, 0.01)

	// A model in cold start: the plan in force is the cold-start table's,
	// the learned one what comes after MinSamples, labelled so.
	r = d.do(t, http.MethodGet, "/v1/routes/sim/models/owner%2Fyoung", "", nil)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	var y frontdoor.Model
	require.NoError(t, json.Unmarshal(r.raw, &y))
	require.False(t, y.Learned)
	require.Equal(t, 20.0, y.MinSamples)
	require.Equal(t, frontdoor.PlanColdStart, y.Plan.Source)
	require.Equal(t, []float64{5, 10, 20}, y.Plan.PollsS[:3], "no hint: 5 s, then backing off")
	require.InDelta(t, 3, y.Plan.MeanDelayS, 0.3, "jobs of about 2 s found at the 5 s poll")
	require.InDelta(t, 1, y.Plan.ExpectedPolls, 1e-9)
	require.Equal(t, y.Plan.MeanDelayS, y.Comparison.Pollux.MeanDelayS, "the comparison is of the plan in force")
	require.NotNil(t, y.LearnedPlan)
	require.Equal(t, frontdoor.PlanLearned, y.LearnedPlan.Source)
	require.Less(t, y.LearnedPlan.MeanDelayS, y.Plan.MeanDelayS, "the learned plan, once in force, detects sooner")

	// The model name unescaped works too.
	r = d.do(t, http.MethodGet, "/v1/routes/sim/models/owner/model", "", nil)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)

	r = d.do(t, http.MethodGet, "/v1/routes/sim/models/unknown", "", nil)
	requireError(t, r, http.StatusNotFound, frontdoor.CodeModelNotFound, "model")
	r = d.do(t, http.MethodGet, "/v1/routes/nowhere/models/owner%2Fmodel", "", nil)
	requireError(t, r, http.StatusNotFound, frontdoor.CodeUnknownRoute, "name")

	// GET /v1/models lists the index's models with what is learned.
	d.event(t, state.Job{ID: "a", Route: route, Model: "owner/model", State: state.Running, CreatedAt: t0}, 1)
	d.event(t, state.Job{ID: "b", Route: route, Model: "owner/new", State: state.Running, CreatedAt: t0}, 1)
	require.Eventually(t, func() bool { n, _ := d.index.Size(); return n == 2 }, 10*time.Second, 10*time.Millisecond)
	r = d.do(t, http.MethodGet, "/v1/models?route=sim", "", nil)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	var ms frontdoor.Models
	require.NoError(t, json.Unmarshal(r.raw, &ms))
	require.Len(t, ms.Models, 2)
	byName := map[string]frontdoor.ModelSummary{}
	for _, s := range ms.Models {
		byName[s.Model] = s
	}
	require.True(t, byName["owner/model"].Learned)
	require.InDelta(t, 25, byName["owner/model"].P50S, 2.5)
	require.Equal(t, "/v1/routes/sim/models/owner%2Fmodel", byName["owner/model"].Href)
	require.False(t, byName["owner/new"].Learned)
	require.Zero(t, byName["owner/new"].Samples)
	r = d.do(t, http.MethodGet, "/v1/models?route=nowhere", "", nil)
	requireError(t, r, http.StatusNotFound, frontdoor.CodeUnknownRoute, "route")
}

// POST /v1/jobs/track publishes a track request; without an id the job's
// id derives from the remote id.
func TestTrack(t *testing.T) {
	t.Parallel()
	d := setup(t, frontdoor.Config{})
	r := d.do(t, http.MethodPost, "/v1/jobs/track", `{"route":"sim","v":1,"remote_id":"r-42","model":"owner/model"}`, nil)
	require.Equal(t, http.StatusAccepted, r.status, "body %s", r.raw)
	id := events.RemoteKeyID(route, "r-42")
	require.Equal(t, id, r.body["id"])
	require.Equal(t, "/v1/jobs/"+id, r.header.Get("Location"))
	m, err := events.DecodeTrack(d.lastIntake(t, d.ns.Track(route)))
	require.NoError(t, err)
	require.Equal(t, "r-42", m.RemoteID)

	r = d.do(t, http.MethodPost, "/v1/jobs/track", `{"route":"sim","v":1,"id":"mine","remote_id":"r-43","model":"owner/model"}`, nil)
	require.Equal(t, "mine", r.body["id"])

	for _, tc := range []struct {
		body   string
		status int
		code   frontdoor.Code
		field  string
	}{
		{`{"route":"sim","v":1,"model":"m"}`, 400, frontdoor.CodeInvalidField, "remote_id"},
		{`{"route":"sim","v":1,"remote_id":"a/b","model":"m"}`, 400, frontdoor.CodeInvalidField, "remote_id"},
		{`{"v":1,"remote_id":"r","model":"m"}`, 400, frontdoor.CodeInvalidField, "route"},
		{`{"route":"nowhere","v":1,"remote_id":"r","model":"m"}`, 404, frontdoor.CodeUnknownRoute, "route"},
		{`{"route":"sim","v":1,"remote_id":"r","model":"m","deadline":"2020-01-01T00:00:00Z"}`, 400, frontdoor.CodeInvalidField, "deadline"},
	} {
		r := d.do(t, http.MethodPost, "/v1/jobs/track", tc.body, nil)
		requireError(t, r, tc.status, tc.code, tc.field)
	}

	// A job named "track" is read on the same path.
	d.createJob(t, "track", state.Running)
	r = d.do(t, http.MethodGet, "/v1/jobs/track", "", nil)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	require.Equal(t, "track", r.body["id"])
}

// The fleet's numbers are an operator's: an app's tokens read each
// route's name, state and pauses, and a model's learned durations, but no
// count of what every app's jobs make together — the routes' counts,
// activity, backlog, leases, the budget levels, a model's samples — which
// would tell an app how much the others do. An admin reads them all.
func TestAnAppSeesNoFleetNumbers(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.LoadTokens(tokensFile(t, tokenAlice+" read app="+ownApp, tokenBob+" admin"))
	require.NoError(t, err)
	d := setupWith(t, frontdoor.Config{Tokens: tokens}, all(withIndex, withCensus, withLearned))
	d.event(t, state.Job{ID: "rival-1", Route: route, Model: "owner/model", App: otherApp, State: state.Running, CreatedAt: time.Now()}, 1)
	require.Eventually(t, func() bool { n, _ := d.index.Size(); return n == 1 }, 10*time.Second, 10*time.Millisecond)
	get := func(tok, path string, v any) {
		r := d.do(t, http.MethodGet, path, "", map[string]string{"Authorization": "Bearer " + tok})
		require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
		require.NoError(t, json.Unmarshal(r.raw, v))
	}
	var admin, app frontdoor.Routes
	get(tokenBob, "/v1/routes", &admin)
	get(tokenAlice, "/v1/routes", &app)
	require.Equal(t, 1, admin.Routes[0].Counts[state.Running], "the operator counts the rival's job")
	require.NotNil(t, admin.Activity)
	require.Len(t, app.Routes, len(admin.Routes), "every route, by name")
	for _, v := range app.Routes {
		require.Equal(t, "running", v.State)
		require.Nil(t, v.Counts)
		require.Nil(t, v.Activity)
		require.Nil(t, v.Waiting)
		require.Nil(t, v.Events)
		require.Nil(t, v.Running)
		require.Empty(t, v.Leases)
		require.Zero(t, v.Tracked+v.Parked+v.Backlog+v.Intake)
	}
	require.Nil(t, app.Activity)
	require.Empty(t, app.Levels)

	var adminModels, appModels frontdoor.Models
	get(tokenBob, "/v1/models", &adminModels)
	get(tokenAlice, "/v1/models", &appModels)
	require.Positive(t, adminModels.Models[0].Samples)
	require.Zero(t, appModels.Models[0].Samples)
	require.Equal(t, adminModels.Models[0].P50S, appModels.Models[0].P50S, "the learned durations are every app's to plan by")
	var adminModel, appModel frontdoor.Model
	get(tokenBob, "/v1/routes/sim/models/owner%2Fmodel", &adminModel)
	get(tokenAlice, "/v1/routes/sim/models/owner%2Fmodel", &appModel)
	require.EqualValues(t, 200, adminModel.Observed)
	require.Zero(t, appModel.Observed)
	require.Zero(t, appModel.Samples)
	require.Equal(t, adminModel.Quantiles, appModel.Quantiles)
}
