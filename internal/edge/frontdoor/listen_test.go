package frontdoor_test

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
)

// Without tokens a front door listens on loopback only, unless insecure
// says a gateway in front authenticates; with tokens anywhere.
func TestCheckExposure(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:8081", ":8081", "192.0.2.7:8081", "[::]:8081", "[2001:db8::1]:8081"} {
		err := frontdoor.CheckExposure(addr, false, false)
		require.ErrorContains(t, err, "listens beyond loopback and the front door has no tokens", addr)
		require.ErrorContains(t, err, "--http-tokens-file", addr)
		require.ErrorContains(t, err, "--http-insecure", addr)
		require.NoError(t, frontdoor.CheckExposure(addr, false, true), "insecure: %s", addr)
		require.NoError(t, frontdoor.CheckExposure(addr, true, false), "tokens: %s", addr)
		_, err = frontdoor.Listen(addr, false, false)
		require.ErrorContains(t, err, "beyond loopback", "Listen checks first: %s", addr)
	}
	for _, addr := range []string{"127.0.0.1:8081", "localhost:0", "[::1]:8081", "127.8.9.1:1"} {
		require.NoError(t, frontdoor.CheckExposure(addr, false, false), addr)
	}
	require.ErrorContains(t, frontdoor.CheckExposure("no-port", true, true), "--http-addr")
}

// The URL printed for a listener is one a client on this machine can
// use, and that a front door without tokens answers: never 0.0.0.0 or [::].
func TestBaseURL(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"0.0.0.0:8081":   "http://127.0.0.1:8081",
		"[::]:8081":      "http://localhost:8081",
		"127.0.0.1:8081": "http://127.0.0.1:8081",
		"[::1]:8081":     "http://[::1]:8081",
		"192.0.2.7:80":   "http://192.0.2.7:80",
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		require.NoError(t, err)
		require.Equal(t, want, frontdoor.BaseURL(a), addr)
	}
	ln, err := frontdoor.Listen(":0", false, true)
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()
	require.Regexp(t, `^http://localhost:\d+$`, frontdoor.BaseURL(ln.Addr()))
}
