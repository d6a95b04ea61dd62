package schedule_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

// replay polls n durations drawn by draw with the plan and returns the
// polls per job and the mean detection delay.
func replay(pl *schedule.Plan, n int, draw func() time.Duration) (float64, time.Duration) {
	var polls int
	var delay time.Duration
	for range n {
		T := draw()
		var t time.Duration
		for {
			t += pl.Delay(t)
			polls++
			if t >= T {
				delay += t - T
				break
			}
		}
	}
	return float64(polls) / float64(n), delay / time.Duration(n)
}

func TestPlanExpectedMatchesReplay(t *testing.T) {
	t.Parallel()
	p := schedule.Policy{}
	pl := p.PlanSurvival(lognormalSurvival(90, 0.5), 6*time.Minute)
	polls, delay := pl.Expected()
	r := rand.New(rand.NewPCG(1, 1))
	gotPolls, gotDelay := replay(pl, 50000, func() time.Duration { return lognormal(r, 90, 0.5) })
	require.InEpsilon(t, polls, gotPolls, 0.02)
	require.InEpsilon(t, delay.Seconds(), gotDelay.Seconds(), 0.03)
}

func TestPlanIsOptimalAmongPlans(t *testing.T) {
	t.Parallel()
	// Each plan is the best of the family at its own poll cost, and
	// polls fall and delays rise as polls get dearer.
	survival := lognormalSurvival(60, 0.7)
	costs := []time.Duration{time.Second / 4, time.Second, 2 * time.Second, 5 * time.Second, 20 * time.Second, time.Minute}
	type point struct{ polls, delay float64 }
	var pts []point
	for _, c := range costs {
		polls, delay := schedule.Policy{PollCost: c}.PlanSurvival(survival, 10*time.Minute).Expected()
		pts = append(pts, point{polls, delay.Seconds()})
	}
	for i, c := range costs {
		own := pts[i].polls + pts[i].delay/c.Seconds()
		for j := range pts {
			require.LessOrEqual(t, own, pts[j].polls+pts[j].delay/c.Seconds()+1e-9, "cost %v: plan %d beats the own plan", c, j)
		}
		if i > 0 {
			require.LessOrEqual(t, pts[i].polls, pts[i-1].polls+1e-9, "monotone: polls")
			require.GreaterOrEqual(t, pts[i].delay, pts[i-1].delay-1e-9, "monotone: delay")
		}
	}
}

func TestPlanContinuesOptimallyAfterAnyElapsedTime(t *testing.T) {
	t.Parallel()
	// The plan for T conditioned on T > s0 polls, after s0, exactly as the
	// plan for T does: one table serves every continuation.
	p := schedule.Policy{}
	survival := lognormalSurvival(90, 0.6)
	const horizon = 8 * time.Minute // the same grid for both
	whole := p.PlanSurvival(survival, horizon)
	for _, s0 := range []time.Duration{20 * time.Second, 75 * time.Second, 3 * time.Minute} {
		cond := p.PlanSurvival(func(t time.Duration) float64 {
			if t <= s0 {
				return 1
			}
			return survival(t) / survival(s0)
		}, horizon)
		for t0 := s0; t0 < horizon; t0 += 700 * time.Millisecond {
			require.Equal(t, whole.Delay(t0), cond.Delay(t0), "after %v, at %v", s0, t0)
		}
	}
}

func TestPlanBounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		p        schedule.Policy
		min, max time.Duration
	}{
		{"defaults", schedule.Policy{}, time.Second, time.Minute},
		{"tight cap", schedule.Policy{MaxDelay: 10 * time.Second, MinDelay: 2 * time.Second}, 2 * time.Second, 10 * time.Second},
		{"scaled", schedule.Policy{Scale: 20}, 50 * time.Millisecond, 3 * time.Second},
	}
	d := learned(30, 1, 500, 2)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := tt.p.Plan(d)
			for x := time.Duration(0); x < 2*time.Hour; x += 333 * time.Millisecond {
				got := pl.Delay(x)
				require.GreaterOrEqual(t, got, tt.min)
				require.LessOrEqual(t, got, tt.max)
			}
			require.Equal(t, tt.max, pl.Delay(48*time.Hour), "past the horizon: every MaxDelay")
		})
	}
}

func TestPlanPollsWhereJobsEnd(t *testing.T) {
	t.Parallel()
	// Jobs end uniformly between 100 and 110 s: the plan waits as long as
	// MaxDelay allows, then polls through the window at shrinking
	// intervals (as Keller found for the uniform law) and closes it.
	uniform := func(t time.Duration) float64 {
		return min(1, max(0, (110-t.Seconds())/10))
	}
	times := schedule.Policy{MaxDelay: 2 * time.Minute}.PlanSurvival(uniform, 2*time.Minute).Times(6)
	require.Greater(t, times[0], 100*time.Second)
	require.Less(t, times[0], 107*time.Second)
	i := 1
	for ; times[i-1] < 110*time.Second; i++ {
		if i >= 2 {
			require.LessOrEqual(t, times[i]-times[i-1], times[i-1]-times[i-2], "shrinking intervals")
		}
	}
	require.Less(t, times[i-1], 112*time.Second, "a poll closes the window")
}

func TestPlanCache(t *testing.T) {
	t.Parallel()
	d := learned(45, 0.4, 300, 9)
	p := schedule.Policy{PollCost: 3 * time.Second}
	require.Same(t, p.Plan(d), p.Plan(d), "cached")
	c := *d
	require.Same(t, p.Plan(d), p.Plan(&c), "keyed by contents")
	require.NotSame(t, p.Plan(d), schedule.Policy{PollCost: 4 * time.Second}.Plan(d), "and by the policy")
	c.Observe(time.Minute)
	require.NotSame(t, p.Plan(d), p.Plan(&c))
}
