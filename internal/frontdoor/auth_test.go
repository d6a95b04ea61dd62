package frontdoor_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/frontdoor"
)

const (
	tokenA = "tok-aaaaaaaaaaaaaaaaaaaaaaaa"
	tokenB = "tok-bbbbbbbbbbbbbbbbbbbbbbbb=="
)

// With tokens, every endpoint answers 401 without one of them, and works
// as before with any of them.
func TestTokensGuardEveryEndpoint(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.ParseTokens(strings.NewReader("# rotation: old and new\n" + tokenA + "\n\n  " + tokenB + "  \n"))
	require.NoError(t, err)
	require.Equal(t, 2, tokens.Len())
	d := setup(t, frontdoor.Config{Tokens: tokens})
	d.createJob(t, "job-1", "running")
	const body = `{"route":"sim","id":"job-2","v":1,"model":"owner/model","input":{}}`

	for _, ep := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/jobs", body},
		{http.MethodGet, "/v1/jobs/job-1", ""},
		{http.MethodPost, "/v1/jobs/job-1/cancel", `{}`},
		{http.MethodGet, "/v1/jobs/job-1/events?route=sim", ""},
		{http.MethodGet, "/nowhere", ""},
	} {
		t.Run(ep.method+" "+ep.path, func(t *testing.T) {
			r := d.do(t, ep.method, ep.path, ep.body, nil)
			requireError(t, r, http.StatusUnauthorized, frontdoor.CodeUnauthorized, "")
			require.Equal(t, `Bearer realm="pollux"`, r.header.Get("WWW-Authenticate"))

			for _, bad := range []string{
				"Bearer tok-cccccccccccccccccccccccc", // unknown
				"Bearer " + tokenA[:len(tokenA)-1],    // a prefix of a known one
				"Bearer " + tokenA + "x",              // a known one, extended
				"Bearer ",                             // empty
				"Bearer " + strings.Repeat("a", 4096), // oversized
			} {
				r := d.do(t, ep.method, ep.path, ep.body, map[string]string{"Authorization": bad})
				requireError(t, r, http.StatusUnauthorized, frontdoor.CodeUnauthorized, "")
				require.Equal(t, `Bearer realm="pollux", error="invalid_token"`, r.header.Get("WWW-Authenticate"))
				require.NotContains(t, string(r.raw), "tok-", "the answer never echoes a token")
			}
			r = d.do(t, ep.method, ep.path, ep.body, map[string]string{"Authorization": "Basic " + tokenA})
			requireError(t, r, http.StatusUnauthorized, frontdoor.CodeUnauthorized, "")
		})
	}

	// Either token works, the scheme in any case (RFC 7235).
	r := d.do(t, http.MethodGet, "/v1/jobs/job-1", "", map[string]string{"Authorization": "Bearer " + tokenA})
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	r = d.do(t, http.MethodPost, "/v1/jobs", body, map[string]string{"Authorization": "bearer " + tokenB})
	require.Equal(t, http.StatusAccepted, r.status, "body %s", r.raw)
	require.NotEmpty(t, d.lastIntake(t, d.ns.Submit("sim")))
	r = d.do(t, http.MethodGet, "/nowhere", "", map[string]string{"Authorization": "Bearer " + tokenB})
	requireError(t, r, http.StatusNotFound, frontdoor.CodeNotFound, "")
}

// A tokens file is checked whole at start; its errors name the line and
// never the token.
func TestLoadTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(content string) string {
		p := filepath.Join(dir, "tokens")
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	tokens, err := frontdoor.LoadTokens(write(tokenA + "\n"))
	require.NoError(t, err)
	require.Equal(t, 1, tokens.Len())

	for _, tc := range []struct{ content, want string }{
		{"", "no tokens"},
		{"# only a comment\n\n", "no tokens"},
		{tokenA + "\nshort-secret\n", "line 2: a token must have 16 to 512 characters, this one has 12"},
		{"tok-with space-inside-it\n", "line 1: character 9 is not allowed"},
		{"tok-with\"quote-inside-it\n", "line 1: character 9 is not allowed"},
		{"================\n", "only '='"},
		{tokenA + "=x\n", "line 1: character 29 is not allowed"},
		{strings.Repeat("a", 513) + "\n", "this one has 513"},
		{strings.Repeat(tokenA+"\n", 1001), "line 1001: more than 1000 tokens"},
		{strings.Repeat("#", 1<<20+1), "larger than 1048576 bytes"},
	} {
		_, err := frontdoor.LoadTokens(write(tc.content))
		require.ErrorContains(t, err, tc.want)
		require.NotContains(t, err.Error(), "short-secret")
		require.NotContains(t, err.Error(), "tok-with")
	}
	_, err = frontdoor.LoadTokens(filepath.Join(dir, "missing"))
	require.ErrorContains(t, err, "front door tokens")
}

// Without tokens the front door stays open, as documented.
func TestNoTokensNoAuth(t *testing.T) {
	t.Parallel()
	d := setup(t, frontdoor.Config{})
	d.createJob(t, "job-1", "running")
	r := d.do(t, http.MethodGet, "/v1/jobs/job-1", "", nil)
	require.Equal(t, http.StatusOK, r.status)
}
