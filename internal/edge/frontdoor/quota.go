package frontdoor

import (
	"context"
	"encoding/hex"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
)

// Quotas. A token of the tokens file with rate=N may make N requests a
// second, and an app with apps.<name>.rate=M its tokens M together; beyond
// either a request is answered 429 too_many_requests with Retry-After —
// an app that polls too hard is held to its quota, whatever it asks for.
// Both hold across the fleet: each is a request quota of the budgets'
// lease machinery (budget.Quotas: rate leases on POLLUX_SLOTS that every
// front door takes from), so three front doors behind a balancer admit
// what one would — a second's worth at once, then the rate. A token is
// named there by a digest of it (TokenQuotaScope), never by the token. A
// quota that cannot be asked (NATS away) lets the request through,
// logged.

// quotaWait is how long a request waits for a lease of its quota.
const quotaWait = 50 * time.Millisecond

// TokenQuotaScope names a token's request quota among the budgets: the
// first 8 bytes of its SHA-256, in hex.
func TokenQuotaScope(sum [32]byte) string {
	return events.Scope(events.LevelToken, hex.EncodeToString(sum[:8]))
}

// overQuota takes one request from p's token's quota, then from its app's,
// or returns the 429 that says to come back.
func (s *Server) overQuota(ctx context.Context, p principal) *apiError {
	if err := s.quotas.Take(ctx, TokenQuotaScope(p.token.sum), p.token.rate, quotaWait); err != nil {
		return s.quotaRefusal(err, p, "this token's quota (rate= in the tokens file, across the fleet) is spent; retry after 1s")
	}
	if p.app == "" {
		return nil
	}
	if err := s.quotas.Take(ctx, events.Scope(events.LevelApp, p.app), s.cfg.AppRates[p.app], quotaWait); err != nil {
		return s.quotaRefusal(err, p, "app "+p.app+"'s quota (apps."+p.app+".rate, across the fleet) is spent; retry after 1s")
	}
	return nil
}

// quotaRefusal is the 429 of a quota spent (message says whose), or nil
// when the quota could not be asked: the request goes through, logged at
// most once every quotaLogEvery (an outage would log every request).
func (s *Server) quotaRefusal(err error, p principal, message string) *apiError {
	if errors.Is(err, budget.ErrOverQuota) {
		e := tooMany(time.Second)
		e.detail.Message = message
		return e
	}
	now := time.Now().UnixNano()
	if last := s.quotaLogged.Load(); now-last >= int64(quotaLogEvery) && s.quotaLogged.CompareAndSwap(last, now) {
		s.log.Warn().Err(err).Str(logkey.App, p.app).Str(logkey.By, p.name).Msg("a request quota could not be asked; requests go through until it can")
	}
	return nil
}

// quotaLogEvery is how often a quota that cannot be asked is logged.
const quotaLogEvery = 10 * time.Second

func tooMany(wait time.Duration) *apiError {
	secs := int(math.Ceil(wait.Seconds()))
	e := fail(http.StatusTooManyRequests, CodeTooManyRequests, "", "this token's quota (rate= in the tokens file) is spent; retry after "+strconv.Itoa(secs)+"s")
	e.header = http.Header{}
	e.header.Set("Retry-After", strconv.Itoa(secs))
	e.retryAfter = wait
	return e
}
