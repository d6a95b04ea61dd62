package config

import (
	"fmt"

	"github.com/pollux-dev/pollux/pkg/events"
)

// App is an application that shares this Pollux with others: its front
// door tokens name it (app= in the tokens file), its jobs carry it, and
// it sees only its own. With apps configured, a token or a submission
// naming another app is refused.
type App struct{}

func (a App) validate() error { return nil }

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
