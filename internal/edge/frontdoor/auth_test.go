package frontdoor_test

import (
	"context"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
)

const (
	tokenA = "tok-aaaaaaaaaaaaaaaaaaaaaaaa"
	tokenB = "tok-bbbbbbbbbbbbbbbbbbbbbbbb=="
)

// With tokens, every endpoint answers 401 without one of them, and works
// as before with any of them.
func TestTokensGuardEveryEndpoint(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.ParseTokens(strings.NewReader("# rotation: old and new\n" + tokenA + " admin\n\n  " + tokenB + " admin \n"))
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
		{"tok-with-a-long-body space-inside-it\n", "line 1: word 1 after the token is neither a role"},
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

const (
	tokenAlice = "tok-alice-aaaaaaaaaaaaaaaaaaaa"
	tokenBob   = "tok-bob-bbbbbbbbbbbbbbbbbbbbbb"
	tokenRead  = "tok-read-rrrrrrrrrrrrrrrrrrrrr"
)

// tokensFile writes a tokens file of lines and returns its path.
func tokensFile(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	return p
}

// actionDoor runs a front door that pauses routes, with a tokens file of
// lines and a running job job-1.
func actionDoor(t *testing.T, lines ...string) *door {
	t.Helper()
	tokens, err := frontdoor.LoadTokens(tokensFile(t, lines...))
	require.NoError(t, err)
	d := setupWith(t, frontdoor.Config{Tokens: tokens}, withPauses)
	d.createJob(t, "job-1", "running")
	return d
}

// A tokens file's lines give roles and names; the errors name neither
// token nor anything after it.
func TestTokenRoles(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenAlice + " act name=alice\n" + tokenRead + " read\n" + tokenBob + " name=bob read\n" + tokenA + "\n"))
	require.NoError(t, err)
	require.Equal(t, 4, tokens.Len())
	for _, tc := range []struct{ content, want string }{
		{tokenA + " write\n", "line 1: word 1 after the token is neither a role"},
		{tokenA + " read act\n", "line 1: word 2 after the token is neither a role"},
		{tokenA + " name=a name=b\n", "line 1: name= given twice"},
		{tokenA + " name=\n", "line 1: a name is 1 to 64 bytes"},
		{tokenA + " name=" + strings.Repeat("n", 65) + "\n", "line 1: a name is 1 to 64 bytes"},
		{tokenA + " " + tokenB + "\n", "line 1: word 1 after the token"},
	} {
		_, err := frontdoor.ParseTokens(strings.NewReader(tc.content))
		require.ErrorContains(t, err, tc.want)
		require.NotContains(t, err.Error(), "tok-")
	}
}

// stateChanging lists every state-changing endpoint of api/openapi.yaml
// outside the console's session endpoints and the faces, with a body that would
// otherwise be accepted.
func stateChanging(t *testing.T) []struct{ path, body string } {
	t.Helper()
	b, err := os.ReadFile("../../../api/openapi.yaml")
	require.NoError(t, err)
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(b, &doc))
	bodies := map[string]string{
		"/v1/jobs":                 `{"route":"sim","id":"job-9","v":1,"model":"owner/model","input":{}}`,
		"/v1/jobs/track":           `{"route":"sim","v":1,"remote_id":"r-9","model":"owner/model"}`,
		"/v1/jobs/{id}/cancel":     `{"reason":"test"}`,
		"/v1/jobs/{id}/resubmit":   `{"reason":"test"}`,
		"/v1/jobs/cancel":          `{"ids":["job-1"],"confirm":1}`,
		"/v1/jobs/resubmit":        `{"ids":["job-1"],"confirm":1}`,
		"/v1/routes/{name}/pause":  `{"reason":"test","for":"30m"}`,
		"/v1/routes/{name}/resume": `{"reason":"test"}`,
	}
	var out []struct{ path, body string }
	for path, ops := range doc.Paths {
		if strings.HasPrefix(path, "/console/") || isFacePath(path) {
			continue // a face is mounted by configuration: TestAFaceIsBehindTheFrontDoor
		}
		for method := range ops {
			if method == "parameters" || !slices.Contains([]string{"post", "put", "patch", "delete"}, method) {
				continue
			}
			require.Equal(t, "post", method, "%s %s: a new method to cover here", method, path)
			body, ok := bodies[path]
			require.True(t, ok, "POST %s: add it to the state-changing endpoints of this test", path)
			out = append(out, struct{ path, body string }{strings.NewReplacer("{id}", "job-1", "{name}", "sim").Replace(path), body})
		}
	}
	require.Len(t, out, len(bodies))
	return out
}

// isFacePath reports whether path is a provider face's (its refusals
// are in the provider's shape: each face's tests check them).
func isFacePath(path string) bool {
	return slices.ContainsFunc(face.Kinds, func(k face.Kind) bool { return strings.HasPrefix(path, "/"+string(k)+"/") })
}

// A read-only token is refused every state-changing endpoint (403
// forbidden) and may read; an acting token may do both.
func TestReadOnlyTokenMayNotAct(t *testing.T) {
	t.Parallel()
	d := actionDoor(t, tokenAlice+" admin name=alice", tokenRead+" read name=reader app=team")
	read := map[string]string{"Authorization": "Bearer " + tokenRead}
	for _, ep := range stateChanging(t) {
		r := d.do(t, http.MethodPost, ep.path, ep.body, read)
		requireError(t, r, http.StatusForbidden, frontdoor.CodeForbidden, "")
		require.Contains(t, r.body["error"].(map[string]any)["message"], "read-only")
	}
	info, err := d.res.Intake.Info(context.Background())
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "nothing refused was published")
	r := d.do(t, http.MethodGet, "/v1/jobs/job-1", "", read)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)

	act := map[string]string{"Authorization": "Bearer " + tokenAlice}
	for _, ep := range stateChanging(t) {
		r := d.do(t, http.MethodPost, ep.path, ep.body, act)
		require.Contains(t, []int{http.StatusOK, http.StatusAccepted, http.StatusConflict}, r.status, "POST %s: %s", ep.path, r.raw)
	}
}

// answer is what a test reads of a response whose body it has closed.
type answer struct {
	StatusCode int
	Header     http.Header
}

// login posts the login form and returns the answer and its session
// cookie.
func (d *door) login(t *testing.T, token string, header map[string]string) (answer, *http.Cookie) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, d.url+"/console/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if h := header["Host"]; h != "" {
		req.Host = h
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	a := answer{StatusCode: resp.StatusCode, Header: resp.Header}
	for _, c := range resp.Cookies() {
		if c.Name == frontdoor.SessionCookie {
			return a, c
		}
	}
	return a, nil
}

// A console login sets an HttpOnly, SameSite=Strict session cookie
// (Secure but over plain http to a loopback host); requests made with it
// change state only with the session's CSRF token, and never with a
// read-only token's session.
func TestConsoleSession(t *testing.T) {
	t.Parallel()
	d := actionDoor(t, tokenAlice+" admin name=alice", tokenRead+" read app=team")

	resp, c := d.login(t, tokenAlice, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotNil(t, c)
	require.True(t, c.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	require.False(t, c.Secure, "plain http to 127.0.0.1: a browser would not send a Secure cookie back")
	require.Equal(t, "/", c.Path)
	require.InDelta(t, frontdoor.SessionLifetime.Seconds(), float64(c.MaxAge), 1)
	require.NotContains(t, c.Value, tokenAlice)
	require.NotContains(t, c.Value, "tok-")

	_, secure := d.login(t, tokenAlice, map[string]string{"Host": "pollux.example.com"})
	require.True(t, secure.Secure, "beyond loopback the cookie is Secure")

	cookie := map[string]string{"Cookie": frontdoor.SessionCookie + "=" + c.Value}
	r := d.do(t, http.MethodGet, "/console/session", "", cookie)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	require.Equal(t, "admin", r.body["role"])
	require.Equal(t, "alice", r.body["name"])
	require.Equal(t, true, r.body["auth"])
	csrf, _ := r.body["csrf"].(string)
	require.NotEmpty(t, csrf)

	// Reading needs no CSRF token.
	r = d.do(t, http.MethodGet, "/v1/jobs/job-1", "", cookie)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)

	// Acting does.
	const pause = `{"reason":"deploy","for":"30m"}`
	r = d.do(t, http.MethodPost, "/v1/routes/sim/pause", pause, cookie)
	requireError(t, r, http.StatusForbidden, frontdoor.CodeForbidden, frontdoor.CSRFHeader)
	r = d.do(t, http.MethodPost, "/v1/routes/sim/pause", pause, with(cookie, frontdoor.CSRFHeader, csrf+"x"))
	requireError(t, r, http.StatusForbidden, frontdoor.CodeForbidden, frontdoor.CSRFHeader)
	r = d.do(t, http.MethodPost, "/v1/routes/sim/pause", pause, with(cookie, frontdoor.CSRFHeader, csrf))
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	require.Equal(t, "alice", r.body["pause"].(map[string]any)["by"])

	// A tampered cookie is no session.
	r = d.do(t, http.MethodGet, "/console/session", "", map[string]string{"Cookie": frontdoor.SessionCookie + "=" + c.Value[:len(c.Value)-2] + "AA"})
	requireError(t, r, http.StatusUnauthorized, frontdoor.CodeUnauthorized, "")

	// A read-only session may not act, CSRF token or not.
	_, rc := d.login(t, tokenRead, nil)
	readCookie := map[string]string{"Cookie": frontdoor.SessionCookie + "=" + rc.Value}
	r = d.do(t, http.MethodGet, "/console/session", "", readCookie)
	require.Equal(t, "read", r.body["role"])
	r = d.do(t, http.MethodPost, "/v1/routes/sim/resume", `{}`, with(readCookie, frontdoor.CSRFHeader, r.body["csrf"].(string)))
	requireError(t, r, http.StatusForbidden, frontdoor.CodeForbidden, "")
	r = d.do(t, http.MethodPost, "/v1/routes/sim/resume", `{}`, with(readCookie, frontdoor.CSRFHeader, csrf))
	requireError(t, r, http.StatusForbidden, frontdoor.CodeForbidden, frontdoor.CSRFHeader)

	// Logging out clears the cookie.
	r = d.do(t, http.MethodPost, "/console/logout", "", cookie)
	require.Equal(t, http.StatusNoContent, r.status)
	require.Contains(t, r.header.Get("Set-Cookie"), frontdoor.SessionCookie+"=;")
	require.Contains(t, r.header.Get("Set-Cookie"), "Max-Age=0")
}

// with returns header with one more field.
func with(header map[string]string, k, v string) map[string]string {
	out := maps.Clone(header)
	out[k] = v
	return out
}

// A wrong token gets no session: 401 to a script, back to the login page
// for a browser's form.
func TestConsoleLoginRefused(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.LoadTokens(tokensFile(t, tokenAlice))
	require.NoError(t, err)
	d := setup(t, frontdoor.Config{Tokens: tokens})
	resp, c := d.login(t, tokenBob, nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Nil(t, c)
	resp, c = d.login(t, tokenBob, map[string]string{"Accept": "text/html"})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/console/?login=failed", resp.Header.Get("Location"))
	require.Nil(t, c)
	resp, c = d.login(t, tokenAlice, map[string]string{"Accept": "text/html"})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/console/", resp.Header.Get("Location"))
	require.NotNil(t, c)
	r := d.do(t, http.MethodGet, "/console/session", "", nil)
	requireError(t, r, http.StatusUnauthorized, frontdoor.CodeUnauthorized, "")
	// A login from another site is refused before the token is looked at.
	resp, c = d.login(t, tokenAlice, map[string]string{"Origin": "http://evil.example"})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Nil(t, c)
}

// The front door follows its tokens file: a session (and a bearer token)
// stops working at the first request after its token left the file; the
// others go on; a file that no longer parses changes nothing.
func TestSessionEndsWhenItsTokenLeavesTheFile(t *testing.T) {
	t.Parallel()
	path := tokensFile(t, tokenAlice+" name=alice app=team", tokenBob+" name=bob app=team")
	tokens, err := frontdoor.LoadTokens(path)
	require.NoError(t, err)
	d := setup(t, frontdoor.Config{Tokens: tokens})
	d.createJob(t, "job-1", "running")
	_, alice := d.login(t, tokenAlice, nil)
	_, bob := d.login(t, tokenBob, nil)
	session := func(c *http.Cookie) int {
		return d.do(t, http.MethodGet, "/v1/jobs/job-1", "", map[string]string{"Cookie": c.Name + "=" + c.Value}).status
	}
	require.Equal(t, http.StatusOK, session(alice))
	require.Equal(t, http.StatusOK, session(bob))

	require.NoError(t, os.WriteFile(path, []byte(tokenBob+" name=bob app=team\n"), 0o600))
	require.Equal(t, http.StatusUnauthorized, session(alice))
	require.Equal(t, http.StatusOK, session(bob))
	r := d.do(t, http.MethodGet, "/v1/jobs/job-1", "", map[string]string{"Authorization": "Bearer " + tokenAlice})
	requireError(t, r, http.StatusUnauthorized, frontdoor.CodeUnauthorized, "")
	require.Equal(t, 1, tokens.Len())

	require.NoError(t, os.WriteFile(path, []byte("not a token\n"), 0o600))
	require.Equal(t, http.StatusOK, session(bob), "a broken file keeps the tokens read before")
	require.NoError(t, os.Remove(path))
	require.Equal(t, http.StatusOK, session(bob), "so does a missing one")
	require.NoError(t, os.WriteFile(path, []byte(tokenAlice+" app=team\n"), 0o600))
	require.Equal(t, http.StatusUnauthorized, session(bob), "a good file is read again")
}

// A session ends after SessionLifetime.
func TestSessionExpires(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.LoadTokens(tokensFile(t, tokenAlice))
	require.NoError(t, err)
	var now atomic.Pointer[time.Time]
	start := time.Now()
	now.Store(&start)
	d := setup(t, frontdoor.Config{Tokens: tokens, Now: func() time.Time { return *now.Load() }})
	_, c := d.login(t, tokenAlice, nil)
	cookie := map[string]string{"Cookie": c.Name + "=" + c.Value}
	r := d.do(t, http.MethodGet, "/console/session", "", cookie)
	require.Equal(t, http.StatusOK, r.status)
	require.NotEmpty(t, r.body["expires_at"])
	later := start.Add(frontdoor.SessionLifetime + time.Second)
	now.Store(&later)
	r = d.do(t, http.MethodGet, "/console/session", "", cookie)
	requireError(t, r, http.StatusUnauthorized, frontdoor.CodeUnauthorized, "")
}

// A page of another site cannot make a browser act, not even on a front
// door without tokens: a state-changing request with a foreign Origin is
// refused, and a browser's (one with an Origin) needs the CSRF token.
// Scripts without an Origin need nothing.
func TestCrossOriginRequestsRefused(t *testing.T) {
	t.Parallel()
	d := setupWith(t, frontdoor.Config{}, withPauses)
	d.createJob(t, "job-1", "running")
	self := d.url
	host := strings.TrimPrefix(self, "http://")
	for _, origin := range []string{"http://evil.example", "null", "http://" + host + ".evil.example", "https://" + host + "x", "file://"} {
		for _, ep := range stateChanging(t) {
			r := d.do(t, http.MethodPost, ep.path, ep.body, map[string]string{"Origin": origin})
			requireError(t, r, http.StatusForbidden, frontdoor.CodeForbidden, "Origin")
		}
	}
	info, err := d.res.Intake.Info(context.Background())
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "nothing refused was published")

	r := d.do(t, http.MethodGet, "/console/session", "", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, map[string]any{"role": "act", "name": "", "csrf": r.body["csrf"], "auth": false, "all_apps": true}, r.body)
	csrf := r.body["csrf"].(string)
	require.NotEmpty(t, csrf)

	const pause = `{"reason":"deploy"}`
	r = d.do(t, http.MethodPost, "/v1/routes/sim/pause", pause, map[string]string{"Origin": self})
	requireError(t, r, http.StatusForbidden, frontdoor.CodeForbidden, frontdoor.CSRFHeader)
	r = d.do(t, http.MethodPost, "/v1/routes/sim/pause", pause, map[string]string{"Origin": self, frontdoor.CSRFHeader: csrf})
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	require.Equal(t, "console", r.body["pause"].(map[string]any)["by"], "a browser without a token's name acts as the console")
	r = d.do(t, http.MethodPost, "/v1/routes/sim/resume", "", nil)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)

	// Reading from another site is the browser's business (no CORS).
	r = d.do(t, http.MethodGet, "/v1/jobs/job-1", "", map[string]string{"Origin": "http://evil.example"})
	require.Equal(t, http.StatusOK, r.status)
	require.Empty(t, r.header.Get("Access-Control-Allow-Origin"))

	// A login needs a tokens file.
	resp, _ := d.login(t, tokenAlice, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	// Bearer tokens need no CSRF token, but the Origin rule holds.
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenAlice + " app=team\n"))
	require.NoError(t, err)
	d2 := setup(t, frontdoor.Config{Tokens: tokens})
	d2.createJob(t, "job-1", "running")
	bearer := map[string]string{"Authorization": "Bearer " + tokenAlice}
	r = d2.do(t, http.MethodPost, "/v1/jobs/job-1/cancel", `{}`, with(bearer, "Origin", "http://evil.example"))
	requireError(t, r, http.StatusForbidden, frontdoor.CodeForbidden, "Origin")
	r = d2.do(t, http.MethodPost, "/v1/jobs/job-1/cancel", `{}`, with(bearer, "Origin", d2.url))
	require.Equal(t, http.StatusAccepted, r.status, "body %s", r.raw)
}

// A session made on one front door works on every other with the same
// tokens file: the fleet shares no session store.
func TestSessionWorksAcrossTheFleet(t *testing.T) {
	t.Parallel()
	path := tokensFile(t, tokenAlice+" name=alice")
	doors := make([]*door, 2)
	for i := range doors {
		tokens, err := frontdoor.LoadTokens(path)
		require.NoError(t, err)
		doors[i] = setup(t, frontdoor.Config{Tokens: tokens})
	}
	_, c := doors[0].login(t, tokenAlice, nil)
	r := doors[1].do(t, http.MethodGet, "/console/session", "", map[string]string{"Cookie": c.Name + "=" + c.Value})
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	require.Equal(t, "alice", r.body["name"])
}
