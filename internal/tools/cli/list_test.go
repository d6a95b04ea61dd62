package cli_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
)

// post submits a job to a front door.
func post(t *testing.T, base, body string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/v1/jobs", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
}

// `pollux jobs` lists a front door's jobs with its filters, as a table or
// as the front door's JSON.
func TestJobsListsAndFilters(t *testing.T) {
	t.Parallel()
	f := fleetStack(t)
	post(t, f.HTTPURL, `{"route":"sim","v":1,"idempotency_key":"slow-1","model":"owner/slow","input":{}}`)
	post(t, f.HTTPURL, `{"route":"sim","v":1,"idempotency_key":"quick-1","model":"owner/quick","input":{}}`)
	jobs := func(args ...string) frontdoor.JobList {
		t.Helper()
		out, err := run(t, append([]string{"jobs", "--http-url", f.HTTPURL, "--json"}, args...)...)
		require.NoError(t, err)
		var l frontdoor.JobList
		require.NoError(t, json.Unmarshal([]byte(out), &l), out)
		return l
	}
	require.Eventually(t, func() bool { return jobs().Total == 2 }, 20*time.Second, 20*time.Millisecond)

	l := jobs("--model", "owner/slow")
	require.Len(t, l.Jobs, 1)
	require.Equal(t, "slow-1", l.Jobs[0].IdempotencyKey)
	l = jobs("--search", "quick-1", "--route", "sim")
	require.Len(t, l.Jobs, 1)
	require.Equal(t, "owner/quick", l.Jobs[0].Model)
	require.Equal(t, 2, jobs("--since", "1h").Total)
	require.Equal(t, 0, jobs("--before", "1h").Total)
	require.Equal(t, 0, jobs("--since", time.Now().Add(time.Minute).UTC().Format(time.RFC3339)).Total)
	require.Equal(t, 0, jobs("--state", "failed,expired").Total)
	l = jobs("--limit", "1")
	require.Len(t, l.Jobs, 1)
	require.NotEmpty(t, l.Next)
	require.Len(t, jobs("--limit", "1", "--cursor", l.Next).Jobs, 1)

	var stdout, stderr output
	require.NoError(t, pollux(t, &stdout, &stderr, "jobs", "--http-url", f.HTTPURL, "--model", "owner/slow"))
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.Len(t, lines, 2, stdout.String())
	require.Regexp(t, `^ID\s+ROUTE\s+MODEL\s+STATE\s+AGE\s+POLLS\s+REMOTE ID$`, lines[0])
	require.Regexp(t, `^k-\S+\s+sim\s+owner/slow\s+(pending|queued|running)\s`, lines[1])
	require.Equal(t, "1 of 1 jobs\n", stderr.String())

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--since", "yesterday"}, "--since: a duration ago"},
		{[]string{"--limit", "0"}, "--limit: must be from 1 to 500"},
		{[]string{"--state", "bogus"}, `"bogus" is not a state`},
		{[]string{"--http-url", "http://127.0.0.1:1"}, "the front door at http://127.0.0.1:1"},
	} {
		_, err := run(t, append([]string{"jobs", "--http-url", f.HTTPURL}, tc.args...)...)
		require.ErrorContains(t, err, tc.want)
	}
}

// `pollux jobs` sends the token of --token-file (or POLLUX_HTTP_TOKEN) and
// says what a 401 needs.
func TestJobsSendsTheToken(t *testing.T) {
	t.Parallel()
	const token = "tok-cli-aaaaaaaaaaaaaaaaaaaa"
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","message":"send Authorization: Bearer <token>"}}`))
			return
		}
		query = r.URL.RawQuery
		_, _ = w.Write([]byte(`{"jobs":[],"next":"","total":0,"total_capped":false}`))
	}))
	t.Cleanup(srv.Close)
	_, err := run(t, "jobs", "--http-url", srv.URL)
	require.ErrorContains(t, err, "(set POLLUX_HTTP_TOKEN or --token-file) (unauthorized)")

	file := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(file, []byte("# mine\n"+token+" read name=me\n"), 0o600))
	_, err = run(t, "jobs", "--http-url", srv.URL, "--token-file", file, "--route", "sim", "--state", "running,queued", "--search", "k 1")
	require.NoError(t, err)
	require.Equal(t, "limit=50&q=k+1&route=sim&state=running%2Cqueued", query)
	_, err = run(t, "jobs", "--http-url", srv.URL, "--token", token)
	require.NoError(t, err)
}
