package frontdoor_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/pkg/events"
)

// consolePage stands for the console: a page every Host it is asked for
// would otherwise get.
var consolePage = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"page":"console"}`)
})

// withIndexAndPauses gives the front door a jobs index and route pauses.
func withIndexAndPauses(d *door, cfg *frontdoor.Config) {
	withIndex(d, cfg)
	withPauses(d, cfg)
}

// raw sends request, verbatim, to the front door and returns the status
// and body of its answer.
func (d *door) raw(t *testing.T, request string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(d.url, "http://"))
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = io.WriteString(c, strings.ReplaceAll(request, "\n", "\r\n"))
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// requireMisdirected checks the refusal of a request for a host the front
// door does not answer: 421 host_not_allowed, naming the Host and how to
// allow it.
func requireMisdirected(t *testing.T, r reply, host string) {
	t.Helper()
	requireError(t, r, http.StatusMisdirectedRequest, frontdoor.CodeHostNotAllowed, "Host")
	msg := r.body["error"].(map[string]any)["message"].(string)
	require.Contains(t, msg, `"`+host+`"`)
	require.Contains(t, msg, "--http-allowed-hosts")
}

// DNS rebinding: a page on a foreign name that resolves to 127.0.0.1 is,
// to the browser, the same origin as the front door it reaches — its
// requests carry Host and a matching Origin of that name. Without tokens
// the front door answers no path for that Host, so the page can read no
// CSRF token, no job, and pause nothing; a loopback Host is answered.
func TestRebindingRefusedWithoutTokens(t *testing.T) {
	t.Parallel()
	d := setupWith(t, frontdoor.Config{Console: consolePage}, withIndexAndPauses)
	d.createJob(t, "job-1", "running")
	port := d.url[strings.LastIndex(d.url, ":")+1:]
	foreign := "rebind.example:" + port
	page := map[string]string{"Host": foreign, "Origin": "http://" + foreign}

	// The CSRF token a front door without tokens hands any browser.
	r := d.do(t, http.MethodGet, "/console/session", "", nil)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	csrf := r.body["csrf"].(string)

	for _, ep := range []struct{ method, path, body string }{
		{http.MethodGet, "/console/session", ""},
		{http.MethodGet, "/console/", ""},
		{http.MethodGet, "/", ""},
		{http.MethodGet, "/v1/jobs", ""},
		{http.MethodGet, "/v1/jobs/job-1", ""},
		{http.MethodGet, "/v1/routes", ""},
		{http.MethodGet, "/nowhere", ""},
		{http.MethodPost, "/v1/routes/sim/pause", `{"reason":"rebound"}`},
		{http.MethodPost, "/v1/jobs/job-1/cancel", `{}`},
		{http.MethodPost, "/v1/jobs", `{"route":"sim","v":1,"model":"owner/model","input":{}}`},
		{http.MethodPost, "/console/login", ""},
	} {
		r := d.do(t, ep.method, ep.path, ep.body, with(page, frontdoor.CSRFHeader, csrf))
		requireMisdirected(t, r, foreign)
	}
	// Upper case, a trailing dot, no port: the same foreign name.
	for _, h := range []string{"REBIND.example:" + port, "rebind.example.:" + port, "rebind.example", "10.1.2.3:" + port, "127.0.0.1.rebind.example:" + port} {
		requireMisdirected(t, d.do(t, http.MethodGet, "/v1/jobs", "", map[string]string{"Host": h}), h)
	}

	// The same attack over raw HTTP, byte for byte what the page sends.
	status, body := d.raw(t, "GET /console/session HTTP/1.1\nHost: "+foreign+"\nOrigin: http://"+foreign+"\nConnection: close\n\n")
	require.Equal(t, http.StatusMisdirectedRequest, status, body)
	require.NotContains(t, body, csrf)
	pause := `{"reason":"rebound"}`
	status, body = d.raw(t, "POST /v1/routes/sim/pause HTTP/1.1\nHost: "+foreign+"\nOrigin: http://"+foreign+
		"\n"+frontdoor.CSRFHeader+": "+csrf+"\nContent-Type: application/json\nContent-Length: "+strconv.Itoa(len(pause))+"\nConnection: close\n\n"+pause)
	require.Equal(t, http.StatusMisdirectedRequest, status, body)
	require.Contains(t, body, `"code":"host_not_allowed"`)
	// Without a Host at all (HTTP/1.0) it is no loopback name either.
	status, body = d.raw(t, "GET /v1/jobs HTTP/1.0\n\n")
	require.Equal(t, http.StatusMisdirectedRequest, status, body)

	// Nothing came of it: the route is not paused, nothing was published.
	requireError(t, d.do(t, http.MethodPost, "/v1/routes/sim/resume", "", nil), http.StatusConflict, frontdoor.CodeNotPaused, "")
	info, err := d.res.Intake.Info(context.Background())
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "nothing refused was published")

	// Loopback names are answered, the console and the page's own POST too.
	for _, h := range []string{"127.0.0.1:" + port, "localhost:" + port, "LocalHost:" + port, "[::1]:" + port, "127.8.9.1:" + port, "localhost"} {
		for _, path := range []string{"/console/session", "/console/", "/v1/jobs"} {
			r := d.do(t, http.MethodGet, path, "", map[string]string{"Host": h})
			require.Equal(t, http.StatusOK, r.status, "%s %s: %s", h, path, r.raw)
		}
	}
	self := map[string]string{"Host": "localhost:" + port, "Origin": "http://localhost:" + port, frontdoor.CSRFHeader: csrf}
	r = d.do(t, http.MethodPost, "/v1/routes/sim/pause", pause, self)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	status, body = d.raw(t, "GET /v1/jobs HTTP/1.1\nHost: [::1]:"+port+"\nConnection: close\n\n")
	require.Equal(t, http.StatusOK, status, body)
}

// Names in Config.AllowedHosts are answered as loopback ones are; others
// still are not.
func TestAllowedHosts(t *testing.T) {
	t.Parallel()
	d := setup(t, frontdoor.Config{AllowedHosts: []string{"pollux.internal", " Gateway.Example. ", "[fd00::7]", "10.1.2.3"}})
	for _, h := range []string{"pollux.internal:8081", "POLLUX.INTERNAL", "gateway.example:443", "gateway.example.", "[fd00::7]:8081", "10.1.2.3:8081", "127.0.0.1:1"} {
		r := d.do(t, http.MethodGet, "/console/session", "", map[string]string{"Host": h})
		require.Equal(t, http.StatusOK, r.status, "%s: %s", h, r.raw)
	}
	for _, h := range []string{"rebind.example:8081", "evil.pollux.internal", "pollux.internal.evil", "10.1.2.4"} {
		requireMisdirected(t, d.do(t, http.MethodGet, "/console/session", "", map[string]string{"Host": h}), h)
	}

	for _, bad := range []string{"", "pollux.internal:8081", "http://pollux.internal", "pollux.internal/x", "*.example.com", "a..b", "-a.example", "127.0.0.1:80"} {
		_, err := frontdoor.New(frontdoor.Config{Routes: []string{route}, AllowedHosts: []string{bad}}, nil, events.Default, nil, nil)
		require.ErrorContains(t, err, "AllowedHosts", "%q", bad)
	}
}

// With tokens any Host is answered (the attacker's page has no token, and
// the session cookie belongs to the name the console logged in at), a
// token still needed; an allow list, when given, is enforced too.
func TestTokensNeedNoHostCheck(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenA + " admin\n"))
	require.NoError(t, err)
	d := setupWith(t, frontdoor.Config{Tokens: tokens}, withPauses)
	port := d.url[strings.LastIndex(d.url, ":")+1:]
	foreign := "rebind.example:" + port
	page := map[string]string{"Host": foreign, "Origin": "http://" + foreign}
	requireError(t, d.do(t, http.MethodGet, "/console/session", "", page), http.StatusUnauthorized, frontdoor.CodeUnauthorized, "")
	requireError(t, d.do(t, http.MethodGet, "/v1/jobs/job-1", "", page), http.StatusUnauthorized, frontdoor.CodeUnauthorized, "")
	requireError(t, d.do(t, http.MethodPost, "/v1/routes/sim/pause", `{}`, page), http.StatusUnauthorized, frontdoor.CodeUnauthorized, "")
	bearer := map[string]string{"Host": "pollux.example.com", "Authorization": "Bearer " + tokenA}
	r := d.do(t, http.MethodPost, "/v1/routes/sim/pause", `{"reason":"deploy"}`, bearer)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)

	d2 := setup(t, frontdoor.Config{Tokens: tokens, AllowedHosts: []string{"pollux.example.com"}})
	r = d2.do(t, http.MethodGet, "/console/session", "", bearer)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.raw)
	r = d2.do(t, http.MethodGet, "/console/session", "", with(bearer, "Host", foreign))
	requireMisdirected(t, r, foreign)
	require.NotContains(t, string(r.raw), "--http-tokens-file", "it has tokens")
}
