package frontdoor_test

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/core/spend"
	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// A create that would pass its app's budget is refused 429
// budget_exceeded, saying the budget, what is spent and when it resets,
// and nothing is published; a retried create is the job admitted before
// and costs nothing more; another app's budget is its own; through a face
// the refusal is in the face's shape.
func TestACreateOverItsAppsBudgetIsRefused(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenAlice + " app=" + ownApp + "\n" + tokenBob + " app=" + otherApp + "\n"))
	require.NoError(t, err)
	d := setupWith(t, frontdoor.Config{Tokens: tokens, Faces: []face.Mount{{Kind: face.OpenAI, Route: route}}}, func(d *door, cfg *frontdoor.Config) {
		cfg.Spend = spend.New(spend.Config{
			Prices:  map[string]spend.Prices{route: {ByModel: map[string]spend.Price{"*": {Per: spend.PerJob, Amount: 1}}}},
			Budgets: map[string]spend.Budget{ownApp: {Day: 2}, otherApp: {Day: 1}},
		}, d.res.Spend)
	})
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	create := func(tok, key string) reply {
		return d.do(t, http.MethodPost, "/v1/jobs", `{"route":"sim","v":1,"model":"m","input":{},"idempotency_key":"`+key+`"}`, bearer(tok))
	}
	for _, key := range []string{"a", "b", "a"} {
		r := create(tokenAlice, key)
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	}
	before := len(d.intake(t, d.ns.Submit(route)))
	r := create(tokenAlice, "c")
	requireError(t, r, http.StatusTooManyRequests, frontdoor.CodeBudgetExceeded, "app")
	b := r.body["error"].(map[string]any)["budget"].(map[string]any)
	require.Equal(t, "day", b["period"])
	require.EqualValues(t, 2, b["budget"])
	require.EqualValues(t, 2, b["spent"])
	resets, err := time.Parse(time.RFC3339, b["resets_at"].(string))
	require.NoError(t, err)
	require.True(t, resets.After(time.Now()) && resets.Before(time.Now().Add(25*time.Hour)), "%s", resets)
	wait, err := strconv.Atoi(r.header.Get("Retry-After"))
	require.NoError(t, err)
	require.InDelta(t, time.Until(resets).Seconds(), wait, 5, "Retry-After: until the budget resets")
	require.Len(t, d.intake(t, d.ns.Submit(route)), before, "nothing published")

	require.Equal(t, http.StatusAccepted, create(tokenBob, "a").status, "another app's budget")
	// Through a face: OpenAI's create, answered in OpenAI's error shape.
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	require.NoError(t, mw.WriteField("prompt", "a lighthouse"))
	require.NoError(t, mw.Close())
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, d.url+"/openai/sim/v1/videos", &form)
	require.NoError(t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+tokenBob)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	raw, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	body := string(raw)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "%s", body)
	require.Contains(t, body, "has spent its day budget: 1 of 1 counted", "the face's 429, saying the budget")
}

// GET /v1/spend: an app's tokens see their app's spend only, an admin's
// every app's; per day, with what each route and model cost.
// (A route's spend budget, every app's jobs together, is an admin's.)
func TestSpendIsPerApp(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenAlice + " read app=" + ownApp + "\n" + tokenBob + " admin\n"))
	require.NoError(t, err)
	var keeper *spend.Keeper
	d := setupWith(t, frontdoor.Config{Tokens: tokens}, func(d *door, cfg *frontdoor.Config) {
		keeper = spend.New(spend.Config{Prices: map[string]spend.Prices{route: {ByModel: map[string]spend.Price{"*": {Per: spend.PerJob, Amount: 1.5}}}},
			Limits: map[string][]spend.Limit{route: {{Of: "route " + route, Budget: spend.Budget{Month: 100}}}}}, d.res.Spend)
		cfg.Spend = keeper
	})
	for _, j := range []*state.Job{
		{ID: "s1", App: ownApp, Route: route, Model: "m", RemoteID: "r", State: state.Succeeded},
		{ID: "r1", App: otherApp, Route: route, Model: "m", RemoteID: "r", State: state.Succeeded},
	} {
		require.NoError(t, keeper.Admit(t.Context(), j))
		require.NoError(t, keeper.Settle(t.Context(), j))
	}
	apps := func(tok string) []any {
		r := d.do(t, http.MethodGet, "/v1/spend?days=7", "", map[string]string{"Authorization": "Bearer " + tok})
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		return r.body["apps"].([]any)
	}
	own := apps(tokenAlice)
	require.Len(t, own, 1)
	require.Equal(t, ownApp, own[0].(map[string]any)["app"])
	day := own[0].(map[string]any)["days"].([]any)[0].(map[string]any)
	require.EqualValues(t, 1.5, day["spent"])
	require.Equal(t, []any{map[string]any{"route": route, "model": "m", "cost": 1.5, "jobs": float64(1)}}, day["by"])
	require.Len(t, apps(tokenBob), 2, "an admin sees every app")
	// The route's budget counts every app's jobs: an operator's number.
	limits := func(tok string) any {
		return d.do(t, http.MethodGet, "/v1/spend?days=7", "", map[string]string{"Authorization": "Bearer " + tok}).body["limits"]
	}
	require.Equal(t, []any{map[string]any{"of": "route " + route, "budget": map[string]any{"month": float64(100)}, "day": 3.0, "month": 3.0}}, limits(tokenBob))
	require.Nil(t, limits(tokenAlice), "an app's token sees no route's total")
	requireError(t, d.do(t, http.MethodGet, "/v1/spend?days=0", "", map[string]string{"Authorization": "Bearer " + tokenBob}), http.StatusBadRequest, frontdoor.CodeInvalidParameter, "days")
}

// An app's max_waiting: a create past its jobs admitted and not yet
// sent is refused 429 until one starts, saying so.
func TestACreatePastItsAppsMaxWaitingIsRefused(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenAlice + " app=" + ownApp + "\n"))
	require.NoError(t, err)
	d := setupWith(t, frontdoor.Config{Tokens: tokens}, func(d *door, cfg *frontdoor.Config) {
		apps := budget.NewApps(d.js, d.ns, events.Options{}, map[string]budget.AppCap{ownApp: {Waiting: 1}})
		cfg.Spend = spend.New(spend.Config{Apps: apps}, d.res.Spend)
	})
	create := func(key string) reply {
		return d.do(t, http.MethodPost, "/v1/jobs", `{"route":"sim","v":1,"model":"m","input":{},"idempotency_key":"`+key+`"}`,
			map[string]string{"Authorization": "Bearer " + tokenAlice})
	}
	require.Equal(t, http.StatusAccepted, create("a").status)
	require.Equal(t, http.StatusAccepted, create("a").status, "its retry")
	r := create("b")
	requireError(t, r, http.StatusTooManyRequests, frontdoor.CodeBudgetExceeded, "app")
	require.Equal(t, map[string]any{"of": "app " + ownApp, "period": "waiting", "budget": float64(1), "spent": float64(1)}, r.body["error"].(map[string]any)["budget"])
	require.Equal(t, "1", r.header.Get("Retry-After"))
}

// A route's spend budget holds every app's jobs on it: past it a create
// is refused 429 budget_exceeded naming the route, whose budget it is,
// what is spent and when it resets.
func TestACreateOverItsRoutesBudgetIsRefused(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenAlice + " app=" + ownApp + "\n" + tokenBob + " app=" + otherApp + "\n"))
	require.NoError(t, err)
	d := setupWith(t, frontdoor.Config{Tokens: tokens}, func(d *door, cfg *frontdoor.Config) {
		cfg.Spend = spend.New(spend.Config{
			Prices: map[string]spend.Prices{route: {ByModel: map[string]spend.Price{"*": {Per: spend.PerJob, Amount: 1}}}},
			Limits: map[string][]spend.Limit{route: {{Of: "route " + route, Budget: spend.Budget{Day: 1}}}},
		}, d.res.Spend)
	})
	create := func(tok, key string) reply {
		return d.do(t, http.MethodPost, "/v1/jobs", `{"route":"sim","v":1,"model":"m","input":{},"idempotency_key":"`+key+`"}`,
			map[string]string{"Authorization": "Bearer " + tok})
	}
	require.Equal(t, http.StatusAccepted, create(tokenAlice, "a").status)
	r := create(tokenBob, "b")
	requireError(t, r, http.StatusTooManyRequests, frontdoor.CodeBudgetExceeded, "route")
	b := r.body["error"].(map[string]any)["budget"].(map[string]any)
	require.Equal(t, "route "+route, b["of"])
	require.Equal(t, "day", b["period"])
	require.EqualValues(t, 1, b["spent"])
	require.NotEmpty(t, b["resets_at"])
	require.Contains(t, r.body["error"].(map[string]any)["message"], "route sim has spent its day budget: 1 of 1 counted")
}
