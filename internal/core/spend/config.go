package spend

import (
	"fmt"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/pkg/events"
)

// FromConfig reads the routes' prices and the apps' budgets of c, naming
// the field of the first bad one: a negative or not-a-number price or
// budget, or an unknown unit, refuses the start.
func FromConfig(c *config.Config) (map[string]Prices, map[string]Budget, error) {
	prices := map[string]Prices{}
	for _, rn := range c.RouteNames() {
		rc := c.Routes[rn]
		if len(rc.Prices) == 0 {
			continue
		}
		ps := Prices{ByModel: map[string]Price{}, BillsFailed: rc.BillsFailed}
		for model, pc := range rc.Prices {
			p := Price{Per: Unit(pc.Per), Amount: pc.Price, Assumed: pc.AssumedS}
			if err := p.Validate(); err != nil {
				return nil, nil, fmt.Errorf("routes.%s.prices.%s.%w", rn, model, err)
			}
			ps.ByModel[model] = p
		}
		prices[rn] = ps
	}
	budgets := map[string]Budget{}
	for _, app := range c.AppNames() {
		b := Budget{Day: c.Apps[app].Budgets.Day, Month: c.Apps[app].Budgets.Month}
		if err := b.Validate(); err != nil {
			return nil, nil, fmt.Errorf("apps.%s.budgets.%w", app, err)
		}
		if b != (Budget{}) {
			budgets[app] = b
		}
	}
	return prices, budgets, nil
}

// RouteLimits reads the spend budgets of c's routes and accounts
// (spend_budgets): each route's jobs are held to its own and its
// account's, whichever apps they are. A negative or not-a-number budget
// refuses the start, naming its field.
func RouteLimits(c *config.Config) (map[string][]Limit, error) {
	accounts := map[string]Limit{}
	for name, a := range c.Accounts {
		b := Budget{Day: a.SpendBudgets.Day, Month: a.SpendBudgets.Month}
		if err := b.Validate(); err != nil {
			return nil, fmt.Errorf("accounts.%s.spend_budgets.%w", name, err)
		}
		if b != (Budget{}) {
			accounts[name] = Limit{Of: events.LevelAccount + " " + name, Budget: b}
		}
	}
	limits := map[string][]Limit{}
	for _, rn := range c.RouteNames() {
		rc := c.Routes[rn]
		b := Budget{Day: rc.SpendBudgets.Day, Month: rc.SpendBudgets.Month}
		if err := b.Validate(); err != nil {
			return nil, fmt.Errorf("routes.%s.spend_budgets.%w", rn, err)
		}
		if b != (Budget{}) {
			limits[rn] = append(limits[rn], Limit{Of: events.LevelRoute + " " + rn, Budget: b})
		}
		if a, ok := accounts[rc.Account]; ok {
			limits[rn] = append(limits[rn], a)
		}
	}
	return limits, nil
}
