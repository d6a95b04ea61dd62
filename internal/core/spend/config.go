package spend

import (
	"fmt"

	"github.com/pollux-dev/pollux/internal/platform/config"
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
