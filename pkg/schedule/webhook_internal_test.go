package schedule

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A webhook plan's Expected matches a replay of the plan against jobs
// drawn from the distribution it was built from (the smoothed one), whose
// webhook is lost with the plan's chance and otherwise comes late.
func TestWebhookPlanExpectedMatchesReplay(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 1))
	var d Dist
	for range 400 {
		d.Observe(time.Duration(90e9 * (0.6 + 0.8*r.Float64())))
	}
	sd := d.smoothed()
	const late = 2 * time.Second
	for _, miss := range []float64{0.05, 0.3, 1} {
		pl := Policy{}.WebhookPlan(&d, miss, late)
		polls, delay := pl.Expected()
		var gotPolls int
		var gotDelay time.Duration
		const n = 40000
		for range n {
			T := sd.Quantile(r.Float64())
			hook := time.Duration(1 << 62)
			if r.Float64() >= miss {
				hook = T + late
			}
			var at time.Duration
			for {
				at += pl.Delay(at)
				if at >= hook {
					gotDelay += hook - T
					break
				}
				gotPolls++
				if at >= T {
					gotDelay += at - T
					break
				}
			}
		}
		require.InDelta(t, polls, float64(gotPolls)/n, 0.03*polls+0.02, "miss %v: polls", miss)
		require.InDelta(t, delay.Seconds(), (gotDelay / n).Seconds(), 0.05*delay.Seconds()+0.3, "miss %v: delay", miss)
	}
}
