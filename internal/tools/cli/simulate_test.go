package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/internal/tools/simulate"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// history starts a NATS server holding n finished jobs of route "r"
// (model "m": 2 s queued, then 40–70 s running; every tenth expired) and
// returns its URL.
func history(t *testing.T, n int) string {
	t.Helper()
	ctx := context.Background()
	s, _, js := natstest.JetStream(t)
	res, err := events.Default.Setup(ctx, js, events.Options{})
	require.NoError(t, err)
	owner := jobs.New(events.Default, js, res, jobs.Config{})
	start := time.Now().Add(-time.Hour)
	for i := range n {
		submitted := start.Add(time.Duration(i) * 15 * time.Second)
		j := &state.Job{ID: fmt.Sprintf("job-%03d", i), Route: "r", Model: "m",
			RemoteID: "x", State: state.Queued, Tracked: true, CreatedAt: submitted, SubmittedAt: submitted}
		rec, _, err := owner.Intake().Accept(ctx, j)
		require.NoError(t, err)
		obs := state.Observation{State: state.Succeeded, StartedAt: submitted.Add(2 * time.Second),
			CompletedAt: submitted.Add(time.Duration(42+i%7*5) * time.Second), At: submitted.Add(time.Minute)}
		if i%10 == 9 {
			obs.State = state.Expired
		}
		_, err = owner.Intake().End(ctx, rec, obs, jobs.Always)
		require.NoError(t, err)
	}
	return s.ClientURL()
}

// writeConfig writes a configuration file of route "r" and returns its
// path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pollux.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
	return path
}

// `simulate --from-fleet` reads the route's finished jobs over NATS,
// writes them as a trace that --trace reads back, and prices a change of
// the route's poll settings (from its configuration, the adapter's poll
// floor included) on them.
func TestSimulateFromFleetPricesAChangeOnTheRoutesHistory(t *testing.T) {
	t.Parallel()
	url := history(t, 150)
	cfg := writeConfig(t, "routes:\n  r:\n    kind: runway\n    token_env: RUNWAY_TOKEN\n    poll: {max_delay: 45s, poll_cost: 3s}\n")
	trace := filepath.Join(t.TempDir(), "trace.csv")
	var stdout, stderr output
	err := pollux(t, &stdout, &stderr, "simulate", "--from-fleet", "--nats-url", url, "--route", "r", "--config", cfg,
		"--warmup", "20", "--export", trace, "--what-if", "max_delay=20s", "--what-if", "min_delay=8s")
	require.NoError(t, err, stderr.String())
	require.Regexp(t, `^max_delay 45s → 20s, min_delay 5s → 8s: polls/job \d+\.\d\d → \d+\.\d\d \([+−]\d+%\), mean delay .* \(115 jobs scored\)\n$`, stdout.String())
	require.Contains(t, stderr.String(), "135 finished jobs of route r from ")
	require.Contains(t, stderr.String(), "15 left out (expired, lost or canceled by the user)")

	f, err := os.Open(trace)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	back, err := simulate.ReadTrace(f)
	require.NoError(t, err)
	require.Len(t, back, 135)
	require.Equal(t, simulate.Job{Model: "m", Submit: 15, Queue: 2, Duration: 47, Outcome: "succeeded"}, back[1])

	// The comparison of strategies runs on the history too; --export-only
	// needs no configuration.
	out, err := run(t, "simulate", "--from-fleet", "--nats-url", url, "--route", "r", "--config", cfg, "--warmup", "20", "--strategy", "adaptive,fixed:10")
	require.NoError(t, err)
	require.Contains(t, out, "poll cost 3s, delays within [5s, 45s]")
	require.Regexp(t, `\bm +adaptive +3 s`, out)
	out, err = run(t, "simulate", "--from-fleet", "--nats-url", url, "--route", "r", "--config", "/nonexistent", "--export", trace, "--export-only")
	require.NoError(t, err)
	require.Empty(t, out)
	_, err = run(t, "simulate", "--from-fleet", "--nats-url", url, "--route", "r", "--config", cfg, "--what-if", "min_delay=2s")
	require.ErrorContains(t, err, "--what-if: min_delay 2s is below the poll floor of route r's provider, 5s, which the route keeps")
	_, err = run(t, "simulate", "--from-fleet", "--nats-url", url, "--route", "r", "--config", cfg, "--what-if", "jitter=0.1", "--warmup", "135")
	require.ErrorContains(t, err, "--warmup 135: no model has more jobs than that")
}

// Every flag of simulate is checked before anything runs, and its error
// names it.
func TestSimulateRefusesBadFlags(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "routes:\n  r:\n    kind: replicate\n    token_env: T\n")
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"--from-fleet and --trace exclude each other", []string{"--from-fleet", "--route", "r", "--trace", "x.csv"}},
		{"--from-fleet and --workload exclude each other", []string{"--from-fleet", "--route", "r", "--workload", "bimodal"}},
		{"--from-fleet: name the route with --route", []string{"--from-fleet"}},
		{"--route: only with --from-fleet", []string{"--route", "r"}},
		{"--model: only with --from-fleet", []string{"--model", "m"}},
		{"--since: only with --from-fleet", []string{"--since", "1h"}},
		{"--export: only with --from-fleet", []string{"--export", "x.csv"}},
		{"--since: must be greater than 0", []string{"--from-fleet", "--route", "r", "--since", "0s"}},
		{`--route: "a.b" is not a route name`, []string{"--from-fleet", "--route", "a.b"}},
		{"--export-only: name the file with --export", []string{"--from-fleet", "--route", "r", "--export-only"}},
		{"--export-only and --what-if exclude each other", []string{"--from-fleet", "--route", "r", "--export", "x.csv", "--export-only", "--what-if", "jitter=0.1"}},
		{"--from-fleet and --poll-cost exclude each other", []string{"--from-fleet", "--route", "r", "--poll-cost", "3s"}},
		{"--what-if: needs the jobs of --from-fleet or --trace", []string{"--what-if", "max_delay=30s"}},
		{"--what-if and --strategy exclude each other", []string{"--trace", "x.csv", "--what-if", "max_delay=30s", "--strategy", "adaptive"}},
		{`--what-if: max_delay: "soon" is not a duration > 0`, []string{"--trace", "x.csv", "--what-if", "max_delay=soon"}},
		{`--what-if: jitter: "0" is not a number in (0, 1)`, []string{"--trace", "x.csv", "--what-if", "jitter=0"}},
		{`--what-if: "retries=3": unknown setting "retries"`, []string{"--trace", "x.csv", "--what-if", "retries=3"}},
		{"--what-if: max_delay: changed twice", []string{"--from-fleet", "--nats-url", nowhere, "--route", "r", "--config", cfg, "--what-if", "max_delay=30s,max_delay=20s"}},
		{"--config /nonexistent: config: open /nonexistent", []string{"--from-fleet", "--nats-url", nowhere, "--route", "r", "--config", "/nonexistent"}},
		{"--route q: no such route in " + cfg + " (routes: r)", []string{"--from-fleet", "--nats-url", nowhere, "--route", "q", "--config", cfg}},
		{"--strategy: unknown strategy", []string{"--strategy", "psychic"}},
	} {
		_, err := run(t, append([]string{"simulate"}, tc.args...)...)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}
