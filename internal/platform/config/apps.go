package config

import (
	"fmt"
	"math"

	"github.com/pollux-dev/pollux/pkg/events"
)

// App is an application that shares this Pollux with others: its front
// door tokens name it (app= in the tokens file), its jobs carry it, and
// it sees only its own. With apps configured, a token or a submission
// naming another app is refused.
type App struct {
	// Rate is the most requests a second the app's tokens make to the
	// front door, together, across the whole fleet (default 0: no limit;
	// at most 1,000,000). Past it a request is answered 429.
	Rate float64 `yaml:"rate"`
	// MaxRunning caps the app's jobs running at providers — sent and not
	// yet ended, whichever routes they take — across the fleet (default
	// 0: no cap). A job past it waits in Pollux, as for a route's cap,
	// until one of the app's jobs ends.
	MaxRunning int `yaml:"max_running"`
	// MaxWaiting caps the app's jobs waiting in Pollux — admitted and not
	// yet sent to a provider: queued behind a running cap, on a paused
	// route — across the fleet (default 0: no cap). A create past it is
	// refused (429 budget_exceeded, a rejected event over NATS) until one
	// starts.
	MaxWaiting int `yaml:"max_waiting"`
	// Budgets are the most the app's jobs may cost (in the routes'
	// prices' currency; default none: no limit). A create that would pass
	// one is refused until the period resets.
	Budgets SpendBudgets `yaml:"budgets"`
}

// SpendBudgets are an app's spend limits per UTC day and month (0: none;
// package spend checks them at start).
type SpendBudgets struct {
	// Day is the most a day (default 0: no limit).
	Day float64 `yaml:"day"`
	// Month is the most a month (default 0: no limit).
	Month float64 `yaml:"month"`
}

// Price is what a provider charges per unit (package spend checks it at
// start).
type Price struct {
	// Per is the unit: job, output_second (the output length the
	// submission asks for, its route's length_from) or run_second (how
	// long the provider ran it) (required).
	Per string `yaml:"per"`
	// Price is the price of one unit (required, at least 0).
	Price float64 `yaml:"price"`
	// AssumedS is how many seconds a job's estimate counts when the job
	// does not say (its length, its expected duration) (default 0).
	AssumedS float64 `yaml:"assumed_s"`
}

func (a App) validate() error {
	switch {
	case math.IsNaN(a.Rate) || a.Rate < 0 || a.Rate > 1_000_000:
		return fmt.Errorf("rate: %v is not a number of requests a second from 0 to 1000000", a.Rate)
	case a.MaxRunning < 0:
		return fmt.Errorf("max_running: %d is negative", a.MaxRunning)
	case a.MaxWaiting < 0:
		return fmt.Errorf("max_waiting: %d is negative", a.MaxWaiting)
	}
	return nil
}

// AppNames lists the configured apps in order (none: any app is
// accepted).
func (c *Config) AppNames() []string { return sortedKeys(c.Apps) }

// validateApps checks the apps' names and settings.
func (c *Config) validateApps() error {
	for _, name := range c.AppNames() {
		if !events.ValidApp(name) {
			return fmt.Errorf("apps.%s: an app's name is 1 to %d characters of [A-Za-z0-9_-]", name, events.MaxAppLen)
		}
		if err := c.Apps[name].validate(); err != nil {
			return fmt.Errorf("apps.%s.%w", name, err)
		}
	}
	return nil
}
