package app

import (
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/custody"
	"github.com/pollux-dev/pollux/pkg/provider"
)

// Custody is output custody's configuration in the environment: the
// routes that keep their outputs, the adapters that open outputs
// themselves (provider.OutputOpener), the warning's lead time, the
// outputs' TTL, and every route's metrics.
func Custody(e *Env) custody.Config {
	c := custody.Config{Routes: map[string]config.KeepOutputs{}, Openers: map[string]provider.OutputOpener{},
		Options: e.Options(), Logger: e.Log}
	kept := map[string]bool{}
	for name, rc := range e.Config.Routes {
		if rc.KeepOutputs != nil {
			c.Routes[name], kept[name] = *rc.KeepOutputs, true
		}
		if r := e.Routes[name]; r != nil {
			if o, ok := r.Adapter.(provider.OutputOpener); ok {
				c.Openers[name] = o
			}
		}
	}
	if cc := e.Config.Custody; cc != nil {
		c.ExpiringLead, c.TTL = cc.ExpiringLead, cc.TTL
	}
	c.Metrics = e.Metrics.Custody(e.RouteNames(), kept)
	return c
}
