package spend_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/core/spend"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/testkit/stack"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

func TestPricesAreValidated(t *testing.T) {
	t.Parallel()
	require.NoError(t, spend.Price{Per: spend.PerJob, Amount: 0.4}.Validate())
	require.NoError(t, spend.Price{Per: spend.PerOutputSecond, Amount: 0, Assumed: 5}.Validate())
	for _, tc := range []struct {
		p    spend.Price
		want string
	}{
		{spend.Price{Per: "frame", Amount: 1}, `per: "frame" is not a unit`},
		{spend.Price{Per: spend.PerJob, Amount: -1}, "price: -1 is not a non-negative number"},
		{spend.Price{Per: spend.PerJob, Amount: math.NaN()}, "price: NaN"},
		{spend.Price{Per: spend.PerJob, Amount: math.Inf(1)}, "price: +Inf"},
		{spend.Price{Per: spend.PerRunSecond, Amount: 1, Assumed: -3}, "assumed_s: -3"},
	} {
		require.ErrorContains(t, tc.p.Validate(), tc.want)
	}
	require.ErrorContains(t, spend.Budget{Day: math.NaN()}.Validate(), "day: NaN")
	require.ErrorContains(t, spend.Budget{Month: -5}.Validate(), "month: -5")
	require.ErrorContains(t, spend.Budget{Day: 10, Month: 5}.Validate(), "day: more than month")
}

// A job's estimate and its cost by unit: a job that never reached its
// provider costs nothing unless the route bills it; polls never count.
func TestEstimateAndActual(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	done := &state.Job{RemoteID: "r", State: state.Succeeded, Length: 8, StartedAt: start, CompletedAt: start.Add(90 * time.Second), Polls: 40}
	failedEarly := &state.Job{State: state.Failed, Length: 8}
	for _, tc := range []struct {
		name        string
		p           spend.Price
		j           *state.Job
		billsFailed bool
		estimate    float64
		actual      float64
	}{
		{"per job", spend.Price{Per: spend.PerJob, Amount: 0.5}, done, false, 0.5, 0.5},
		{"per output second", spend.Price{Per: spend.PerOutputSecond, Amount: 0.1, Assumed: 5}, done, false, 0.8, 0.8},
		{"per output second, no length: assumed", spend.Price{Per: spend.PerOutputSecond, Amount: 0.1, Assumed: 5},
			&state.Job{RemoteID: "r", State: state.Succeeded}, false, 0.5, 0.5},
		{"per run second", spend.Price{Per: spend.PerRunSecond, Amount: 0.01, Assumed: 60}, done, false, 0.6, 0.9},
		{"failed before start", spend.Price{Per: spend.PerJob, Amount: 0.5}, failedEarly, false, 0.5, 0},
		{"failed before start, billed", spend.Price{Per: spend.PerJob, Amount: 0.5}, failedEarly, true, 0.5, 0.5},
		{"output never made", spend.Price{Per: spend.PerOutputSecond, Amount: 0.1}, &state.Job{RemoteID: "r", State: state.Failed, Length: 8}, false, 0.8, 0},
	} {
		require.InDelta(t, tc.estimate, tc.p.Estimate(tc.j), 1e-9, tc.name)
		require.InDelta(t, tc.actual, tc.p.Actual(tc.j, tc.billsFailed), 1e-9, tc.name)
	}
}

// The ledger admits up to the budget and refuses past it, saying the
// budget, what is spent and when it resets; a job admitted twice is
// counted once; its settlement replaces its estimate once, and a create
// retried after it is still the job admitted before.
func TestLedgerHoldsTheBudget(t *testing.T) {
	t.Parallel()
	s := stack.New(t, stack.Config{})
	l := spend.NewLedger(s.Res.Spend)
	ctx := context.Background()
	at := time.Date(2026, 12, 7, 15, 0, 0, 0, time.UTC)
	b := spend.Budget{Day: 2, Month: 10}
	require.NoError(t, l.Admit(ctx, "studio", "j1", 1.5, b, at))
	require.NoError(t, l.Admit(ctx, "studio", "j1", 1.5, b, at), "the same job again")
	err := l.Admit(ctx, "studio", "j2", 1, b, at)
	var ob *spend.OverBudgetError
	require.ErrorAs(t, err, &ob)
	require.Equal(t, "day", ob.Period)
	require.InDelta(t, 2, ob.Budget, 1e-9)
	require.InDelta(t, 1.5, ob.Spent, 1e-9)
	require.Equal(t, time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC), ob.ResetsAt)
	day, month, err := l.Spent(ctx, "studio", at)
	require.NoError(t, err)
	require.InDelta(t, 1.5, day, 1e-9)
	require.InDelta(t, 1.5, month, 1e-9, "a refusal reserves nothing")
	require.NoError(t, l.Admit(ctx, "rival", "j3", 1.9, b, at), "another app's budget")

	app, err := l.Settle(ctx, "j1", 0.25, "sim", "m")
	require.NoError(t, err)
	require.Equal(t, "studio", app)
	_, err = l.Settle(ctx, "j1", 0.25, "sim", "m")
	require.NoError(t, err)
	day, month, err = l.Spent(ctx, "studio", at)
	require.NoError(t, err)
	require.InDelta(t, 0.25, day, 1e-9)
	require.InDelta(t, 0.25, month, 1e-9)
	require.NoError(t, l.Admit(ctx, "studio", "j1", 1.5, b, at), "a create retried after its job ended")
	day, _, err = l.Spent(ctx, "studio", at)
	require.NoError(t, err)
	require.InDelta(t, 0.25, day, 1e-9, "reserves nothing more")

	day, _, err = l.Spent(ctx, "studio", at.Add(24*time.Hour))
	require.NoError(t, err)
	require.Zero(t, day, "the next day starts at nothing")
}

// Three processes' ledgers on one NATS admit, between them, exactly what
// the budget holds: every admission is a compare-and-set of the shared
// total.
func TestLedgerHoldsAcrossProcesses(t *testing.T) {
	t.Parallel()
	s := stack.New(t, stack.Config{})
	var ledgers []*spend.Ledger
	for range 3 {
		nc, err := nats.Connect(s.Server.ClientURL())
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		kv, err := js.KeyValue(context.Background(), s.NS.SpendBucket())
		require.NoError(t, err)
		ledgers = append(ledgers, spend.NewLedger(kv))
	}
	at := time.Now()
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Go(func() {
			err := ledgers[i%3].Admit(context.Background(), "studio", "c"+string(rune('A'+i%26))+string(rune('a'+i/26)), 1, spend.Budget{Day: 25}, at)
			switch {
			case err == nil:
				admitted.Add(1)
			case errors.As(err, new(*spend.OverBudgetError)):
				refused.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 25, admitted.Load())
	require.EqualValues(t, 35, refused.Load())
	day, _, err := ledgers[0].Spent(context.Background(), "studio", at)
	require.NoError(t, err)
	require.InDelta(t, 25, day, 1e-9)
}

// A price or budget that is negative, not a number or in an unknown unit
// refuses the start, naming its field.
func TestFromConfigNamesTheBadField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ yaml, want string }{
		{"routes: {r: {kind: sim, prices: {'*': {per: frame, price: 1}}}}", `routes.r.prices.*.per: "frame" is not a unit`},
		{"routes: {r: {kind: sim, prices: {m: {per: job, price: -0.5}}}}", "routes.r.prices.m.price: -0.5"},
		{"routes: {r: {kind: sim, prices: {m: {per: job, price: .nan}}}}", "routes.r.prices.m.price: NaN"},
		{"routes: {r: {kind: sim}}\napps: {studio: {budgets: {day: -1}}}", "apps.studio.budgets.day: -1"},
		{"routes: {r: {kind: sim}}\napps: {studio: {budgets: {month: .nan}}}", "apps.studio.budgets.month: NaN"},
	} {
		c, err := config.Parse(strings.NewReader(tc.yaml))
		require.NoError(t, err, tc.yaml)
		_, _, err = spend.FromConfig(c)
		require.ErrorContains(t, err, tc.want)
	}
	c, err := config.Parse(strings.NewReader("routes: {r: {kind: sim, bills_failed: true, prices: {m: {per: output_second, price: 0.1, assumed_s: 5}}}}\napps: {studio: {budgets: {day: 20, month: 300}}}"))
	require.NoError(t, err)
	prices, budgets, err := spend.FromConfig(c)
	require.NoError(t, err)
	require.Equal(t, spend.Prices{ByModel: map[string]spend.Price{"m": {Per: spend.PerOutputSecond, Amount: 0.1, Assumed: 5}}, BillsFailed: true}, prices["r"])
	require.Equal(t, spend.Budget{Day: 20, Month: 300}, budgets["studio"])
}

// The report: each app's days, oldest first, with what each route and
// model cost; one app's only when the caller may see only it.
func TestReportByAppDayRouteAndModel(t *testing.T) {
	t.Parallel()
	s := stack.New(t, stack.Config{})
	now := time.Now().UTC()
	k := spend.New(spend.Config{
		Prices:  map[string]spend.Prices{"sim": {ByModel: map[string]spend.Price{"*": {Per: spend.PerJob, Amount: 2}}}},
		Budgets: map[string]spend.Budget{"studio": {Day: 100}},
		Now:     func() time.Time { return now },
	}, s.Res.Spend)
	ctx := context.Background()
	for i, j := range []*state.Job{
		{ID: "a", App: "studio", Route: "sim", Model: "acme/video", RemoteID: "r", State: state.Succeeded},
		{ID: "b", App: "studio", Route: "sim", Model: "acme/video", RemoteID: "r", State: state.Succeeded},
		{ID: "c", App: "studio", Route: "sim", Model: "acme/other", State: state.Failed}, // never started: nothing
		{ID: "d", App: "rival", Route: "sim", Model: "acme/video", RemoteID: "r", State: state.Succeeded},
		{ID: "e", Route: "sim", Model: "acme/video", RemoteID: "r", State: state.Running}, // under way: its estimate
	} {
		require.NoError(t, k.Admit(ctx, j), i)
		if j.State.Terminal() {
			require.NoError(t, k.Settle(ctx, j))
		}
	}
	all, err := k.Report(ctx, false, "", 7, now)
	require.NoError(t, err)
	require.Len(t, all, 3)
	require.Equal(t, "", all[0].App, "jobs of no app")
	require.InDelta(t, 2, all[0].Days[0].Spent, 1e-9)
	studio := all[2]
	require.Equal(t, "studio", studio.App)
	require.Equal(t, spend.Budget{Day: 100}, studio.Budget)
	require.InDelta(t, 4, studio.Month, 1e-9)
	require.Len(t, studio.Days, 1)
	require.Equal(t, now.Format(time.DateOnly), studio.Days[0].Date)
	require.InDelta(t, 4, studio.Days[0].Spent, 1e-9)
	require.Equal(t, []spend.Line{{Route: "sim", Model: "acme/other", Cost: 0, Jobs: 1}, {Route: "sim", Model: "acme/video", Cost: 4, Jobs: 2}}, studio.Days[0].By)

	one, err := k.Report(ctx, true, "rival", 7, now)
	require.NoError(t, err)
	require.Len(t, one, 1)
	require.Equal(t, "rival", one[0].App)
	none, err := k.Report(ctx, true, "nobody", 7, now)
	require.NoError(t, err)
	require.Empty(t, none)
}

// An app's max_waiting is taken at admission: a create past it is
// refused until one starts or makes nothing; a job admitted twice counts
// once; a create refused by its budget takes no waiting place.
func TestAdmissionTakesTheAppsWaitingPlace(t *testing.T) {
	t.Parallel()
	s := stack.New(t, stack.Config{})
	apps := budget.NewApps(s.JS, s.NS, events.Options{}, map[string]budget.AppCap{"studio": {Waiting: 2}})
	k := spend.New(spend.Config{Apps: apps,
		Prices:  map[string]spend.Prices{"sim": {ByModel: map[string]spend.Price{"dear": {Per: spend.PerJob, Amount: 10}}}},
		Budgets: map[string]spend.Budget{"studio": {Day: 5}}}, s.Res.Spend)
	ctx := context.Background()
	job := func(id string) *state.Job { return &state.Job{ID: id, App: "studio", Route: "sim", Model: "m"} }
	require.NoError(t, k.Admit(ctx, job("a")))
	require.NoError(t, k.Admit(ctx, job("a")), "the same job")
	dear := job("dear")
	dear.Model = "dear"
	var ob *spend.OverBudgetError
	require.ErrorAs(t, k.Admit(ctx, dear), &ob)
	require.Equal(t, &events.RejectedBudget{Of: "app studio", Period: "day", Budget: 5, Spent: 0, Estimate: 10, ResetsAt: ob.ResetsAt}, spend.Refusal(k.Admit(ctx, dear)))
	require.NoError(t, k.Admit(ctx, job("b")), "the refused job holds no waiting place")
	var full *budget.WaitingFullError
	require.ErrorAs(t, k.Admit(ctx, job("c")), &full)
	require.Equal(t, &events.RejectedBudget{Of: "app studio", Period: "waiting", Budget: 2, Spent: 2}, spend.Refusal(full))
	require.Nil(t, spend.Refusal(errors.New("not a refusal")))
	require.Contains(t, full.Error(), "app studio has 2 jobs waiting to be sent to a provider, its max_waiting")
	require.NoError(t, k.Admit(ctx, &state.Job{ID: "x", App: "rival", Route: "sim", Model: "m"}), "another app has no cap")

	require.NoError(t, apps.Started(ctx, "studio", "a"))
	require.NoError(t, k.Admit(ctx, job("c")), "a started: room for one")
	require.ErrorAs(t, k.Admit(ctx, job("d")), &full)
	require.NoError(t, k.Release(ctx, "studio", "c"), "c's create was not stored")
	require.NoError(t, k.Admit(ctx, job("d")))
}

// A route's and an account's spend budgets hold their jobs whichever
// apps they are: a create that would pass one is refused naming it, and
// a job's settlement and release move their totals as its app's.
func TestRouteAndAccountBudgetsHoldEveryApp(t *testing.T) {
	t.Parallel()
	s := stack.New(t, stack.Config{})
	c, err := config.Parse(strings.NewReader(`
accounts: {acme: {spend_budgets: {day: 7}}}
routes:
  sim: {kind: sim, account: acme, spend_budgets: {day: 5}, prices: {"*": {per: job, price: 3}}}
  other: {kind: sim, account: acme, prices: {"*": {per: job, price: 3}}}
  free: {kind: sim, prices: {"*": {per: job, price: 3}}}
`))
	require.NoError(t, err)
	prices, budgets, err := spend.FromConfig(c)
	require.NoError(t, err)
	limits, err := spend.RouteLimits(c)
	require.NoError(t, err)
	require.Equal(t, map[string][]spend.Limit{
		"sim":   {{Of: "route sim", Budget: spend.Budget{Day: 5}}, {Of: "account acme", Budget: spend.Budget{Day: 7}}},
		"other": {{Of: "account acme", Budget: spend.Budget{Day: 7}}},
	}, limits)
	k := spend.New(spend.Config{Prices: prices, Budgets: budgets, Limits: limits}, s.Res.Spend)
	ctx := context.Background()
	job := func(id, app, route string) *state.Job { return &state.Job{ID: id, App: app, Route: route, Model: "m"} }
	require.NoError(t, k.Admit(ctx, job("a", "studio", "sim")))
	var ob *spend.OverBudgetError
	require.ErrorAs(t, k.Admit(ctx, job("b", "rival", "sim")), &ob, "another app's job on the same route")
	require.Equal(t, "route sim", ob.Of)
	require.Contains(t, ob.Error(), "route sim has spent its day budget: 3 of 5 counted")
	require.Equal(t, "route", spend.Refusal(ob).Field())
	require.NoError(t, k.Admit(ctx, job("c", "rival", "other")), "the account has 7: 6 counted")
	require.ErrorAs(t, k.Admit(ctx, job("d", "rival", "other")), &ob)
	require.Equal(t, "account acme", ob.Of)
	require.NoError(t, k.Admit(ctx, job("e", "rival", "free")), "a route of no account, no budget")

	require.NoError(t, k.Release(ctx, "studio", "a"), "a's create was not stored")
	require.NoError(t, k.Admit(ctx, job("b", "rival", "sim")), "the route's and the account's estimate given back")
	ended := job("b", "rival", "sim")
	ended.State, ended.RemoteID = state.Failed, "" // never started: it cost nothing
	require.NoError(t, k.Settle(ctx, ended))
	require.NoError(t, k.Admit(ctx, job("f", "studio", "sim")), "its settlement gave the route its 3 back")
	day, _, err := k.Ledger().SpentOf(ctx, "route sim", time.Now())
	require.NoError(t, err)
	require.InDelta(t, 3, day, 1e-9, "f's estimate; b cost nothing")
	day, _, err = k.Ledger().SpentOf(ctx, "account acme", time.Now())
	require.NoError(t, err)
	require.InDelta(t, 6, day, 1e-9, "c's and f's")

	for _, tc := range []struct{ yaml, want string }{
		{"routes: {r: {kind: sim, spend_budgets: {day: -1}}}", "routes.r.spend_budgets.day: -1"},
		{"accounts: {a: {spend_budgets: {month: .nan}}}\nroutes: {r: {kind: sim, account: a}}", "accounts.a.spend_budgets.month: NaN"},
		{"routes: {r: {kind: sim, spend_budgets: {day: 9, month: 3}}}", "routes.r.spend_budgets.day: more than month"},
	} {
		c, err := config.Parse(strings.NewReader(tc.yaml))
		require.NoError(t, err, tc.yaml)
		_, err = spend.RouteLimits(c)
		require.ErrorContains(t, err, tc.want)
	}
}
