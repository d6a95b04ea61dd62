package schedule_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

// A route learns its model's durations from the jobs that end; the Dist is
// what Pollux keeps in the pollux-stats bucket.
func ExampleDist() {
	r := rand.New(rand.NewPCG(1, 1))
	var d schedule.Dist
	for range 500 {
		d.Observe(time.Duration(90*math.Exp(0.3*r.NormFloat64())) * time.Second)
	}
	fmt.Printf("median %.0fs, 90%% by %.0fs, effective samples %.0f\n",
		d.Quantile(0.5).Seconds(), d.Quantile(0.9).Seconds(), d.Weight())
	fmt.Printf("still running after 2 min: %.0f%%\n", 100*d.Survival(2*time.Minute))
	// Output:
	// median 89s, 90% by 143s, effective samples 73
	// still running after 2 min: 20%
}

func ExampleDist_MarshalJSON() {
	var d schedule.Dist
	for _, s := range []int{58, 61, 61, 64, 70} {
		d.Observe(time.Duration(s) * time.Second)
	}
	data, _ := json.Marshal(&d)
	fmt.Println(string(data))
	// Output: {"v":1,"n":5,"first":78,"w":[0.9461,1.932,0.9862,1]}
}

// The plan of a model whose jobs take 80–100 s: no poll is wasted before
// they can end, and one poll is worth 2 s of delay.
func ExamplePolicy_Plan() {
	r := rand.New(rand.NewPCG(1, 1))
	var d schedule.Dist
	for range 300 {
		d.Observe(time.Duration(80+20*r.Float64()) * time.Second)
	}
	plan := schedule.Policy{PollCost: 2 * time.Second, MaxDelay: 2 * time.Minute}.Plan(&d)
	for _, t := range plan.Times(4) {
		fmt.Println(t.Round(time.Second))
	}
	polls, delay := plan.Expected()
	fmt.Printf("%.1f polls, %.1fs mean delay\n", polls, delay.Seconds())
	// Output:
	// 1m27s
	// 1m33s
	// 1m38s
	// 1m44s
	// 2.1 polls, 3.7s mean delay
}

// With a learned distribution the poller's call is the same: the policy
// follows the plan from the job's elapsed time.
func ExamplePolicy_Next_learned() {
	r := rand.New(rand.NewPCG(2, 2))
	var d schedule.Dist
	for range 300 {
		d.Observe(time.Duration(60*math.Exp(0.2*r.NormFloat64())) * time.Second)
	}
	p := schedule.Policy{Jitter: 0.1}
	submitted := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	first := p.Next(schedule.Job{Now: submitted, Submitted: submitted, Learned: &d}, r)
	fmt.Println(first >= 45*time.Second && first <= time.Minute) // not before the jobs end, at most MaxDelay
	// Output: true
}
