package frontdoor_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/testkit/stack"
)

// An app's quota holds across the fleet: three front doors on one NATS,
// each asked as fast as a client can by the app's token for two seconds,
// admit between them the app's rate — a second's worth of leases at the
// start, then the rate — not three times it; another app's quota is its
// own, and an admin has none.
func TestAnAppsQuotaHoldsAcrossFrontDoors(t *testing.T) {
	t.Parallel()
	const rate, window = 20.0, 2 * time.Second
	s := stack.New(t, stack.Config{})
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenAlice + " app=" + ownApp + "\n" + tokenBob + " admin\n"))
	require.NoError(t, err)
	var doors []*door
	for range 3 {
		b, err := budget.Ensure(context.Background(), s.JS, s.NS, s.Res.Slots, frontdoor.AppQuotaScope(ownApp), frontdoor.AppQuotaKind, budget.Limit{Rate: rate}, s.Options)
		require.NoError(t, err)
		doors = append(doors, setupOn(t, s, frontdoor.Config{Tokens: tokens, AppQuotas: map[string]*budget.Budget{ownApp: b}}, nil))
	}
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(window)
	for _, d := range doors {
		for range 2 {
			wg.Go(func() {
				for time.Now().Before(end) {
					r := d.do(t, http.MethodGet, "/v1/jobs/none", "", map[string]string{"Authorization": "Bearer " + tokenAlice})
					switch r.status {
					case http.StatusTooManyRequests:
						refused.Add(1)
						require.NotEmpty(t, r.header.Get("Retry-After"))
					default:
						ok.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	// A second's worth of leases at the start, then rate a second: at most
	// a second's worth more (three front doors each with a quota of its
	// own would admit three times it). The floor is loose: a busy machine
	// starves the clients, never the quota.
	want := rate * (window.Seconds() + 1)
	require.LessOrEqual(t, float64(ok.Load()), want+rate, "admitted across three front doors (refused %d)", refused.Load())
	require.GreaterOrEqual(t, float64(ok.Load()), rate, "admitted across three front doors (refused %d)", refused.Load())
	require.Positive(t, refused.Load())
	for _, d := range doors {
		r := d.do(t, http.MethodGet, "/v1/jobs/none", "", map[string]string{"Authorization": "Bearer " + tokenBob})
		require.NotEqual(t, http.StatusTooManyRequests, r.status, "an admin has no app quota")
	}
}
