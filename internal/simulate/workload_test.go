package simulate

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWorkloads(t *testing.T) {
	t.Parallel()
	require.Len(t, WorkloadNames(), 8)
	medians := map[string]float64{ // of the total time, queue included
		"lognormal-0.25": 94, "lognormal-0.5": 94, "lognormal-1": 94,
		"bimodal": 45, "heavy-tail": 52, "slowdown": 100, "early-failures": 120, "long-queue": 235,
	}
	for _, w := range Workloads() {
		t.Run(w.Name, func(t *testing.T) {
			t.Parallel()
			jobs := w.Jobs(4000, 1)
			require.Equal(t, jobs, w.Jobs(4000, 1), "reproducible")
			require.NotEqual(t, jobs, w.Jobs(4000, 2), "seeded")
			var durations []float64
			for i, j := range jobs {
				require.Equal(t, w.Name, j.Model)
				require.Positive(t, j.Duration)
				require.Less(t, j.Queue, j.Duration)
				require.Contains(t, Outcomes, j.Outcome)
				if i > 0 {
					require.GreaterOrEqual(t, j.Submit, jobs[i-1].Submit, "in submit order")
				}
				durations = append(durations, j.Duration)
			}
			slices.Sort(durations)
			require.InEpsilon(t, medians[w.Name], durations[len(durations)/2], 0.15)
		})
	}
	_, err := LookupWorkload("nope")
	require.ErrorContains(t, err, `unknown workload "nope"`)
}

func TestEarlyFailuresAndSlowdown(t *testing.T) {
	t.Parallel()
	ef, _ := LookupWorkload("early-failures")
	failed := 0
	for _, j := range ef.Jobs(5000, 1) {
		if j.Outcome == "failed" {
			failed++
			require.Less(t, j.Duration-j.Queue, 60.0, "failures come early")
		}
	}
	require.InDelta(t, 1000, failed, 100)

	sd, _ := LookupWorkload("slowdown")
	jobs := sd.Jobs(4000, 1)
	mean := func(js []Job) float64 {
		s := 0.0
		for _, j := range js {
			s += j.Duration - j.Queue
		}
		return s / float64(len(js))
	}
	require.InEpsilon(t, 2.5, mean(jobs[2000:])/mean(jobs[:2000]), 0.1, "slower by 2.5× halfway")
}
