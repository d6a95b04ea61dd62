package cli_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
)

// `pollux cancel` with a filter shows what it matches and acts only once
// confirmed: without a terminal to ask on it needs --yes. The canceled
// jobs' records say who asked and why.
func TestBulkCancelIsConfirmed(t *testing.T) {
	t.Parallel()
	f := fleetStack(t)
	post(t, f.HTTPURL, `{"route":"sim","v":1,"id":"slow-a","model":"owner/slow","input":{}}`)
	post(t, f.HTTPURL, `{"route":"sim","v":1,"id":"slow-b","model":"owner/slow","input":{}}`)
	count := func(args ...string) int {
		t.Helper()
		out, err := run(t, append([]string{"jobs", "--http-url", f.HTTPURL, "--json"}, args...)...)
		require.NoError(t, err)
		var l frontdoor.JobList
		require.NoError(t, json.Unmarshal([]byte(out), &l), out)
		return l.Total
	}
	require.Eventually(t, func() bool { return count("--model", "owner/slow") == 2 }, 20*time.Second, 20*time.Millisecond)

	out, err := run(t, "cancel", "--http-url", f.HTTPURL, "--model", "owner/slow", "--reason", "wrong prompt")
	require.ErrorContains(t, err, "pass --yes")
	require.Contains(t, out, "2 jobs match")
	_, err = run(t, "cancel", "--http-url", f.HTTPURL, "slow-a", "--model", "owner/slow")
	require.ErrorContains(t, err, "not both")
	require.Zero(t, count("--state", "canceled"), "nothing canceled unconfirmed")

	out, err = run(t, "cancel", "--http-url", f.HTTPURL, "--model", "owner/slow", "--reason", "wrong prompt", "--yes")
	require.NoError(t, err)
	require.Contains(t, out, "2 accepted, 0 skipped")
	require.Eventually(t, func() bool { return count("--state", "canceled") == 2 }, 20*time.Second, 20*time.Millisecond)
	var j map[string]any
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, f.HTTPURL+"/v1/jobs/slow-a", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&j))
	require.Equal(t, "wrong prompt", j["cancel_reason"])
	require.Equal(t, "api", j["cancel_requested_by"])

	_, err = run(t, "resubmit", "--http-url", f.HTTPURL, "slow-a", "--yes")
	require.NoError(t, err, "a canceled job is matched; the answer says it is skipped")
}
