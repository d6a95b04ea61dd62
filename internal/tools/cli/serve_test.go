package cli_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serveToken is the token of the tokens file the serve tests give it.
const serveToken = "serve-token-0123456789abcdef"

// startServe runs `pollux serve` with args on free ports until the test
// ends (run alone: it ends with SIGINT), and returns the POLLUX_HTTP_URL
// it prints and its output.
func startServe(t *testing.T, args ...string) (httpURL string, stderr *output) {
	t.Helper()
	var stdout output
	stderr = &output{}
	done := make(chan error, 1)
	// The data directory first: cleanups run last-registered first, so
	// its removal must come after the interrupt below has stopped serve.
	dir := t.TempDir()
	go func() {
		done <- pollux(t, &stdout, stderr, append([]string{"serve", "--nats-addr", "127.0.0.1:0",
			"--metrics-addr", "127.0.0.1:0", "--data-dir", dir}, args...)...)
	}()
	t.Cleanup(func() {
		interrupt(t)
		require.NoError(t, <-done)
	})
	require.Eventually(t, func() bool {
		for line := range strings.Lines(stdout.String()) {
			if v, ok := strings.CutPrefix(line, "POLLUX_HTTP_URL="); ok {
				httpURL = strings.TrimSpace(v)
			}
		}
		return httpURL != "" && strings.Contains(stderr.String(), "Ctrl-C")
	}, 30*time.Second, 20*time.Millisecond, "stdout: %s\nstderr: %s", &stdout, stderr)
	return httpURL, stderr
}

// get makes a GET with header (Host sets the Host) and returns the status.
func get(t *testing.T, url string, header map[string]string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	req.Host = header["Host"]
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	return resp.StatusCode
}

// `serve` follows ingest's listen rule: without tokens it refuses an
// address beyond loopback before anything starts, unless --http-insecure.
func TestServeBeyondLoopbackNeedsTokens(t *testing.T) {
	t.Parallel()
	// Given a NATS server that is not there, a serve the rule let through
	// would fail (not run until interrupted).
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		_, err := run(t, "serve", "--http-addr", addr, "--nats-url", nowhere, "--metrics-addr", "127.0.0.1:0")
		require.ErrorContains(t, err, "listens beyond loopback and the front door has no tokens", addr)
		require.ErrorContains(t, err, "--http-tokens-file", addr)
		require.ErrorContains(t, err, "--http-insecure", addr)
	}
	_, err := run(t, "serve", "--http-addr", "0.0.0.0:0", "--http-tokens-file", filepath.Join(t.TempDir(), "missing"), "--nats-url", nowhere)
	require.ErrorContains(t, err, "front door tokens", "the tokens file is read at start")
	_, err = run(t, "serve", "--http-addr", "127.0.0.1:0", "--http-allowed-hosts", "gw.example:80", "--nats-url", nowhere, "--metrics-addr", "127.0.0.1:0")
	require.ErrorContains(t, err, "AllowedHosts", "the allow list is checked at start")
}

// The embedded NATS server has no authentication: `serve` refuses it an
// address beyond loopback before anything starts, unless --nats-insecure.
func TestServeNATSBeyondLoopbackIsRefused(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		_, err := run(t, "serve", "--nats-addr", addr, "--http-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--data-dir", t.TempDir())
		require.ErrorContains(t, err, "the embedded NATS server has no authentication", addr)
		require.ErrorContains(t, err, "--nats-insecure", addr)
	}
}

// With tokens `serve` listens on every interface, prints a URL a client
// can use (not [::]), and takes the tokens as ingest does: any Host, a
// token needed, the allow list enforced when given.
func TestServeWithTokensOnEveryInterface(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte(serveToken+" act name=ops\n"), 0o600))
	url, stderr := startServe(t, "--http-addr", ":0", "--http-tokens-file", tokens, "--http-allowed-hosts", "pollux.internal")
	require.Regexp(t, `^http://localhost:\d+$`, url, "a listener on [::] is printed as a loopback URL")
	require.Contains(t, stderr.String(), "takes the 1 tokens of "+tokens)
	bearer := "Bearer " + serveToken
	require.Equal(t, http.StatusUnauthorized, get(t, url+"/v1/jobs", nil))
	require.Equal(t, http.StatusOK, get(t, url+"/v1/jobs", map[string]string{"Authorization": bearer}))
	require.Equal(t, http.StatusOK, get(t, url+"/v1/jobs", map[string]string{"Authorization": bearer, "Host": "pollux.internal:8081"}))
	require.Equal(t, http.StatusMisdirectedRequest, get(t, url+"/v1/jobs", map[string]string{"Authorization": bearer, "Host": "rebind.example:8081"}))
}

// Without tokens, --http-insecure lets `serve` listen on every interface;
// it says so, prints a loopback URL, and answers only loopback and allowed
// names.
func TestServeInsecureAnswersLoopbackNamesOnly(t *testing.T) {
	t.Setenv("POLLUX_HTTP_INSECURE", "true")
	t.Setenv("POLLUX_HTTP_ALLOWED_HOSTS", "pollux.internal,gw.example")
	url, stderr := startServe(t, "--http-addr", "0.0.0.0:0")
	require.Regexp(t, `^http://(127\.0\.0\.1|localhost):\d+$`, url, "never 0.0.0.0 or [::]")
	require.Contains(t, stderr.String(), "WARNING: the front door on 0.0.0.0:0 has no tokens")
	port := url[strings.LastIndex(url, ":")+1:]
	for _, h := range []string{"", "localhost:" + port, "[::1]:" + port, "pollux.internal:" + port, "gw.example"} {
		require.Equal(t, http.StatusOK, get(t, url+"/console/session", map[string]string{"Host": h}), h)
	}
	foreign := "rebind.example:" + port
	for _, path := range []string{"/console/session", "/console/", "/v1/jobs"} {
		require.Equal(t, http.StatusMisdirectedRequest, get(t, url+path, map[string]string{"Host": foreign, "Origin": "http://" + foreign}), path)
	}
}
