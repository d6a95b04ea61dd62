package schedule_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

// webhookJobs replays n jobs expecting a webhook, lost with probability
// miss and otherwise arriving late after the job ends, each polled at the
// delays next gives until a poll or the webhook finds it ended. It returns
// the polls per job and the mean detection delay.
func webhookJobs(n int, miss float64, late time.Duration, seed uint64, next func(now, submitted time.Time) time.Duration) (float64, time.Duration) {
	r := rand.New(rand.NewPCG(seed, 2))
	t0 := time.Unix(0, 0)
	var polls int
	var delay time.Duration
	for range n {
		T := lognormal(r, 90, 0.5)
		hook := time.Duration(1 << 62)
		if r.Float64() >= miss {
			hook = T + late
		}
		var t time.Duration
		for {
			t += next(t0.Add(t), t0)
			if t >= hook {
				delay += hook - T
				break
			}
			polls++
			if t >= T {
				delay += t - T
				break
			}
		}
	}
	return float64(polls) / float64(n), delay / time.Duration(n)
}

// With the webhook always missing, the webhook plan is the ordinary plan:
// the same DP without the webhook's term.
func TestAWebhookPlanThatNeverGetsItsWebhookIsThePlan(t *testing.T) {
	t.Parallel()
	d := learned(20, 0.4, 400, 2)
	p := schedule.Policy{}
	require.Equal(t, p.Plan(d).Times(12), p.WebhookPlan(d, 1, 0).Times(12))
}

// The rarer a missing webhook, the later the first reconciliation poll
// and the fewer the polls; the cost of each plan is the least of all of
// them at its own miss chance.
func TestWebhookPlansFollowTheMissChance(t *testing.T) {
	t.Parallel()
	d := learned(90, 0.5, 400, 4)
	p := schedule.Policy{}
	misses := []float64{0.01, 0.05, 0.2, 0.5, 1}
	var firsts []time.Duration
	var polls []float64
	for _, m := range misses {
		pl := p.WebhookPlan(d, m, 0)
		firsts = append(firsts, pl.Times(1)[0])
		n, _ := pl.Expected()
		polls = append(polls, n)
	}
	for i := 1; i < len(misses); i++ {
		require.LessOrEqual(t, firsts[i], firsts[i-1], "first poll at miss %v after miss %v's", misses[i], misses[i-1])
		require.Greater(t, polls[i], polls[i-1], "polls at miss %v not above miss %v's", misses[i], misses[i-1])
	}
	// The table's quiet period for a job of the median bounds the first
	// poll (median + WebhookGrace; a bound of p90 + the grace found a
	// lost webhook's job later than the table), and Reconcile every later
	// gap.
	quiet := d.Quantile(0.5) + 30*time.Second
	times := p.WebhookPlan(d, 0.01, 0).Times(6)
	require.LessOrEqual(t, times[0], quiet+5*time.Second)
	for i := 1; i < len(times); i++ {
		require.LessOrEqual(t, times[i]-times[i-1], time.Minute+time.Second)
	}
}

// A job expecting a webhook whose miss chance is learned is planned by
// the DP, which costs less than the fixed quiet period at every miss
// chance: fewer polls when webhooks are reliable, less delay when they
// are not. Without the WebhookMiss rule, the two policies are the same
// and this fails.
func TestALearnedMissChanceBeatsTheFixedQuietPeriod(t *testing.T) {
	t.Parallel()
	d := learned(90, 0.5, 400, 5)
	p := schedule.Policy{}
	cost := func(polls float64, delay time.Duration) float64 {
		return polls + delay.Seconds()/schedule.DefaultPollCost.Seconds()
	}
	for _, miss := range []float64{0.02, 0.2, 0.6} {
		rnd := rand.New(rand.NewPCG(7, 7))
		next := func(learnedMiss float64) func(now, sub time.Time) time.Duration {
			return func(now, sub time.Time) time.Duration {
				return p.Next(schedule.Job{Now: now, Submitted: sub, WebhookExpected: true, Learned: d,
					WebhookMiss: learnedMiss, WebhookLate: time.Second}, rnd)
			}
		}
		fixedPolls, fixedDelay := webhookJobs(20000, miss, time.Second, 9, next(0))
		dpPolls, dpDelay := webhookJobs(20000, miss, time.Second, 9, next(miss))
		t.Logf("miss %.2f: fixed quiet %.2f polls %.1fs, planned %.2f polls %.1fs", miss, fixedPolls, fixedDelay.Seconds(), dpPolls, dpDelay.Seconds())
		require.Less(t, cost(dpPolls, dpDelay), cost(fixedPolls, fixedDelay), "miss %v", miss)
	}
}
