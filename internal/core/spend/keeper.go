package spend

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Config is what a Keeper prices and holds to. Zero values mean the
// defaults on each field.
type Config struct {
	// Prices are the routes' prices, by route (a route without: its jobs
	// cost nothing and are not counted).
	Prices map[string]Prices
	// Budgets are the apps' budgets, by app (none: no limit).
	Budgets map[string]Budget
	// Limits are the budgets of each route's jobs, whichever apps they
	// are — the route's own and its account's — by route (none: no
	// limit; RouteLimits).
	Limits map[string][]Limit
	// Lengths read a submission's output length from its input, by route
	// (route.Route.Length).
	Lengths map[string]func(input json.RawMessage) float64
	// Spent observes each ended job's cost (nil: none).
	Spent func(app, route, model string, cost float64)
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Apps are the apps' caps on their jobs (nil: none): an admission
	// takes the job's waiting slot of its app (budget.Apps.Wait).
	Apps *budget.Apps
}

// Keeper prices jobs and holds the apps to their budgets, over a Ledger;
// one per process, shared by the front door, ingest and the owner's
// Terminal hook. A nil Keeper prices nothing.
type Keeper struct {
	cfg    Config
	ledger *Ledger
}

// New is the keeper of cfg over bucket kv (events.Resources.Spend).
func New(cfg Config, kv jetstream.KeyValue) *Keeper {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Keeper{cfg: cfg, ledger: NewLedger(kv)}
}

// Ledger is the keeper's ledger.
func (k *Keeper) Ledger() *Ledger { return k.ledger }

// Budget is app's budget (zero: none).
func (k *Keeper) Budget(app string) Budget {
	if k == nil {
		return Budget{}
	}
	return k.cfg.Budgets[app]
}

// Admit admits job j (its route, model, app, length and expected duration
// as its record has them), the one admission of a job for its app: its
// place among its app's jobs waiting (a *budget.WaitingFullError at its
// max_waiting), and its estimate reserved against its app's budget (an
// *OverBudgetError when it would pass it; its waiting place is given
// back). A job of a route that prices nothing reserves nothing.
func (k *Keeper) Admit(ctx context.Context, j *state.Job) error {
	if k == nil {
		return nil
	}
	if err := k.cfg.Apps.Wait(ctx, j.App, j.ID); err != nil {
		return err
	}
	p, priced := k.cfg.Prices[j.Route].Of(j.Model)
	if !priced {
		return nil
	}
	err := k.ledger.Admit(ctx, j.App, j.ID, p.Estimate(j), k.cfg.Budgets[j.App], k.cfg.Now(), k.cfg.Limits[j.Route]...)
	if err != nil {
		_ = k.cfg.Apps.Started(context.WithoutCancel(ctx), j.App, j.ID)
	}
	return err
}

// Release undoes job id of app's admission when nothing was made of it
// (its create was not stored).
func (k *Keeper) Release(ctx context.Context, app, id string) error {
	if k == nil {
		return nil
	}
	return errors.Join(k.cfg.Apps.Started(ctx, app, id), k.ledger.Release(ctx, id))
}

// AdmitSubmit admits submission m of job id to route, as Admit does the
// job it makes.
func (k *Keeper) AdmitSubmit(ctx context.Context, route, id string, m events.Submit) error {
	if k == nil {
		return nil
	}
	j := &state.Job{ID: id, Route: route, Model: m.Model, App: m.App,
		ExpectedDuration: state.Duration(m.ExpectedDurationS * float64(time.Second))}
	if length := k.cfg.Lengths[route]; length != nil {
		j.Length = length(m.Input)
	}
	return k.Admit(ctx, j)
}

// Settle counts ended job j's cost in place of its estimate.
func (k *Keeper) Settle(ctx context.Context, j *state.Job) error {
	if k == nil {
		return nil
	}
	ps := k.cfg.Prices[j.Route]
	p, priced := ps.Of(j.Model)
	if !priced {
		return nil
	}
	cost := p.Actual(j, ps.BillsFailed)
	if _, err := k.ledger.Settle(ctx, j.ID, cost, j.Route, j.Model); err != nil {
		return err
	}
	if k.cfg.Spent != nil {
		k.cfg.Spent(j.App, j.Route, j.Model, cost)
	}
	return nil
}

// Refusal is the limit that refused an admission (Admit's error): its
// app's budget (*OverBudgetError) or its max_waiting
// (*budget.WaitingFullError), which the caller answers in its own shape
// (a face's error, the front door's problem, a rejected event); nil when
// err is no refusal.
func Refusal(err error) *events.RejectedBudget {
	var ob *OverBudgetError
	var full *budget.WaitingFullError
	switch {
	case errors.As(err, &ob):
		return &events.RejectedBudget{Of: ob.Of, Period: ob.Period, Budget: ob.Budget, Spent: ob.Spent, Estimate: ob.Cost, ResetsAt: ob.ResetsAt}
	case errors.As(err, &full):
		return &events.RejectedBudget{Of: events.LevelApp + " " + full.App, Period: events.PeriodWaiting, Budget: float64(full.Cap), Spent: float64(full.Cap)}
	}
	return nil
}
