package frontdoor_test

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/testkit/stack"
)

// A request quota holds across the fleet, an app's (apps.<name>.rate) as
// a token's (rate=): three front doors on one NATS, each asked as fast as
// a client can by the token for two seconds, admit between them the rate —
// a second's worth of leases at the start, then the rate — not three times
// it; an admin's token, with no quota and no app, is never refused.
func TestQuotasHoldAcrossFrontDoors(t *testing.T) {
	t.Parallel()
	const rate, window = 20.0, 2 * time.Second
	for _, tc := range []struct{ name, line string }{
		{"app", tokenAlice + " app=" + ownApp},
		{"token", tokenAlice + " app=" + ownApp + " rate=20"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := stack.New(t, stack.Config{})
			tokens, err := frontdoor.ParseTokens(strings.NewReader(tc.line + "\n" + tokenBob + " admin\n"))
			require.NoError(t, err)
			cfg := frontdoor.Config{Tokens: tokens, Streams: s.Options}
			if tc.name == "app" {
				cfg.AppRates = map[string]float64{ownApp: rate}
			}
			var doors []*door
			for range 3 {
				doors = append(doors, setupOn(t, s, cfg, nil))
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
								require.Contains(t, r.body["error"].(map[string]any)["message"], "across the fleet")
							default:
								ok.Add(1)
							}
						}
					})
				}
			}
			wg.Wait()
			// A second's worth of leases at the start, then rate a second:
			// at most a second's worth more (three front doors each with a
			// quota of its own would admit three times it). The floor is
			// loose: a busy machine starves the clients, never the quota.
			want := rate * (window.Seconds() + 1)
			require.LessOrEqual(t, float64(ok.Load()), want+rate, "admitted across three front doors (refused %d)", refused.Load())
			require.GreaterOrEqual(t, float64(ok.Load()), rate, "admitted across three front doors (refused %d)", refused.Load())
			require.Positive(t, refused.Load())
			for _, d := range doors {
				r := d.do(t, http.MethodGet, "/v1/jobs/none", "", map[string]string{"Authorization": "Bearer " + tokenBob})
				require.NotEqual(t, http.StatusTooManyRequests, r.status, "an admin has no quota")
			}
		})
	}
}
