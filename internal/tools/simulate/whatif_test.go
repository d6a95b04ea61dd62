package simulate

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

func TestParseChange(t *testing.T) {
	t.Parallel()
	base := schedule.Policy{}.WithDefaults()
	for _, tc := range []struct {
		in, from, to string
		check        func(schedule.Policy) bool
	}{
		{"max_delay=30s", "60s", "30s", func(p schedule.Policy) bool { return p.MaxDelay == 30*time.Second }},
		{" min_delay = 1.5s ", "1s", "1.5s", func(p schedule.Policy) bool { return p.MinDelay == 1500*time.Millisecond }},
		{"poll_cost=1m", "2s", "60s", func(p schedule.Policy) bool { return p.PollCost == time.Minute }},
		{"jitter=0.05", "0.2", "0.05", func(p schedule.Policy) bool { return p.Jitter == 0.05 }},
	} {
		c, err := ParseChange(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.from, c.get(base), tc.in)
		require.Equal(t, tc.to, c.To, tc.in)
		p := base
		c.set(&p)
		require.True(t, tc.check(p), tc.in)
	}
	for in, want := range map[string]string{
		"max_delay":        "want setting=value",
		"=30s":             "want setting=value",
		"max_delay=30":     `max_delay: "30" is not a duration > 0`,
		"min_delay=0s":     `min_delay: "0s" is not a duration > 0`,
		"poll_cost=-2s":    `poll_cost: "-2s" is not a duration > 0`,
		"jitter=0":         `jitter: "0" is not a number in (0, 1)`,
		"jitter=1":         `jitter: "1" is not a number in (0, 1)`,
		"jitter=lots":      `jitter: "lots" is not a number in (0, 1)`,
		"webhook_grace=1s": `unknown setting "webhook_grace"; want one of poll_cost, min_delay, max_delay, jitter`,
	} {
		_, err := ParseChange(in)
		require.ErrorContains(t, err, want, in)
	}
}

// steady is a small deterministic history: two models, jobs every 200 s
// (none overlapping), each model's durations in a fixed cycle.
func steady() []Job {
	var jobs []Job
	for i := range 60 {
		j := Job{Model: "slow", Submit: float64(400 * i), Queue: 2, Duration: 100 + float64(i%5)*10, Outcome: "succeeded"}
		jobs = append(jobs, j)
		jobs = append(jobs, Job{Model: "quick", Submit: float64(400*i + 200), Queue: 1, Duration: 20 + float64(i%3), Outcome: "succeeded"})
	}
	return jobs
}

// A change priced on the same history: the figures of every job are the
// job-weighted figures of the models', the differences are the changed
// run's less the base's, and a max_delay of 3 s bounds every delay by 3 s
// and costs at least duration / 3 s polls a job.
func TestRunWhatIfPricesAChangeOnTheSameJobs(t *testing.T) {
	t.Parallel()
	c, err := ParseChange("max_delay=3s")
	require.NoError(t, err)
	w, err := RunWhatIf(steady(), []Change{c}, Config{Warmup: 10})
	require.NoError(t, err)
	require.Equal(t, "60s", w.Changes[0].From)
	require.Equal(t, 3*time.Second, w.Changed.MaxDelay)
	require.Equal(t, time.Minute, w.Base.MaxDelay)
	require.Len(t, w.Models, 2)
	require.Equal(t, "slow", w.Models[0].Model)
	require.Equal(t, AllModels, w.All.Model)

	for _, side := range []func(Comparison) Score{
		func(c Comparison) Score { return c.Base },
		func(c Comparison) Score { return c.Changed },
	} {
		all, slow, quick := side(w.All), side(w.Models[0]), side(w.Models[1])
		require.Equal(t, 100, all.Jobs)
		require.Equal(t, 50, slow.Jobs)
		require.InDelta(t, (slow.PollsPerJob+quick.PollsPerJob)/2, all.PollsPerJob, 1e-9)
		require.InDelta(t, (slow.MeanDelayS+quick.MeanDelayS)/2, all.MeanDelayS, 1e-9)
	}
	for _, cmp := range append([]Comparison{w.All}, w.Models...) {
		require.InDelta(t, 100*(cmp.Changed.PollsPerJob/cmp.Base.PollsPerJob-1), cmp.PollsChangePct, 1e-9)
		require.InDelta(t, cmp.Changed.MeanDelayS-cmp.Base.MeanDelayS, cmp.MeanDelayChangeS, 1e-9)
		require.InDelta(t, cmp.Changed.P95DelayS-cmp.Base.P95DelayS, cmp.P95DelayChangeS, 1e-9)
		require.LessOrEqual(t, cmp.Changed.P99DelayS, 3.0)
	}
	require.GreaterOrEqual(t, w.Models[0].Changed.PollsPerJob, 100/3.0)
	require.Greater(t, w.All.PollsChangePct, 100.0)
	require.Less(t, w.All.MeanDelayChangeS, 0.0)

	var out bytes.Buffer
	require.NoError(t, w.Write(&out))
	require.Contains(t, out.String(), "max_delay 60s → 3s: polls/job ")
	require.Regexp(t, `\(\+\d+%\), mean delay \d+\.\d s → \d\.\d s \(−\d+\.\d s\), p95 `, out.String())
	require.Contains(t, out.String(), "(100 jobs scored)")
	require.Contains(t, out.String(), "\n  slow ")

	// Changing nothing changes nothing: both runs have the same seed.
	same, err := ParseChange("max_delay=60s")
	require.NoError(t, err)
	w, err = RunWhatIf(steady(), []Change{same}, Config{Warmup: 10})
	require.NoError(t, err)
	require.Equal(t, w.All.Base, w.All.Changed)
	require.Zero(t, w.All.PollsChangePct)
}

func TestRunWhatIfRefusesWhatCannotBe(t *testing.T) {
	t.Parallel()
	parse := func(s string) Change {
		c, err := ParseChange(s)
		require.NoError(t, err)
		return c
	}
	_, err := RunWhatIf(steady(), []Change{parse("max_delay=3s"), parse("max_delay=5s")}, Config{})
	require.ErrorContains(t, err, "max_delay: changed twice")
	_, err = RunWhatIf(steady(), []Change{parse("min_delay=90s")}, Config{})
	require.ErrorContains(t, err, "min_delay 90s would be above max_delay 60s")
	_, err = RunWhatIf(steady(), nil, Config{})
	require.ErrorContains(t, err, "no change")
	_, err = RunWhatIf(steady(), []Change{parse("jitter=0.1")}, Config{Warmup: 60})
	require.ErrorContains(t, err, "no job scored")
}

func TestSigned(t *testing.T) {
	t.Parallel()
	for x, want := range map[float64]string{19.4: "+19", -2.1: "−2", -0.2: "±0", 0: "±0", 0.4: "±0"} {
		require.Equal(t, want, signed(x, 0), "%g", x)
	}
	require.Equal(t, "−2.1", signed(-2.1, 1))
	require.Equal(t, "+0.1", signed(0.06, 1))
}
