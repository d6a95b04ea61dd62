package frontdoor

import (
	"context"
	"errors"
	"time"

	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/pkg/logkey"
)

// An app's quota (apps.<name>.rate) holds across the fleet: it is a
// budget of the route budgets' lease machinery (package budget) — rate
// leases on POLLUX_SLOTS that every front door of the fleet takes from —
// so three front doors behind a balancer admit what one would. A request
// of an app's token takes a lease (waiting at most appQuotaWait) and
// gives it back at once; the lease rests a second's share before it
// serves again. A token's own rate= stays this process's.

// AppQuotaScope and AppQuotaKind name an app's request quota among the
// budgets (POLLUX_SLOTS; "app~<name>" cannot be a route's scope), which
// the process's wiring sets up (budget.Ensure) into Config.AppQuotas.
func AppQuotaScope(app string) string { return "app~" + app }

// AppQuotaKind is the kind of an app's request quota's leases.
const AppQuotaKind = "requests"

// appQuotaWait is how long a request waits for its app's quota.
const appQuotaWait = 50 * time.Millisecond

// overAppQuota takes one request of p's app from its quota, or returns the
// 429 that says to come back; a quota that cannot be asked (NATS away) lets
// the request through, logged.
func (s *Server) overAppQuota(ctx context.Context, p principal) *apiError {
	b := s.cfg.AppQuotas[p.app]
	if b == nil || p.app == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, appQuotaWait)
	defer cancel()
	l, err := b.Acquire(ctx)
	switch {
	case err == nil:
		l.Release()
		return nil
	case errors.Is(err, budget.ErrBusy), errors.Is(err, context.DeadlineExceeded):
		e := tooMany(time.Second)
		e.detail.Message = "app " + p.app + "'s quota (apps." + p.app + ".rate, across the fleet) is spent; retry after 1s"
		return e
	}
	s.log.Warn().Err(err).Str(logkey.App, p.app).Msg("the app's quota could not be asked; the request goes through")
	return nil
}
