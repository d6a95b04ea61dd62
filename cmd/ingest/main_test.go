package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// Without tokens the front door listens on loopback only: any other
// address is refused at start, before NATS is reached, unless
// --http-insecure (or a tokens file) says otherwise.
func TestFrontDoorBeyondLoopbackNeedsTokens(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8081", ":8081", "192.0.2.7:8081", "[::]:8081"} {
		var stderr bytes.Buffer
		code := run([]string{"--http-addr", addr}, &stderr)
		require.Equal(t, 2, code, addr)
		require.Contains(t, stderr.String(), "listens beyond loopback and the front door has no tokens", addr)
		require.Contains(t, stderr.String(), "--http-insecure", addr)

		t.Setenv("POLLUX_HTTP_ADDR", addr)
		stderr.Reset()
		require.Equal(t, 2, run(nil, &stderr), "the environment twin, %s", addr)
		require.Contains(t, stderr.String(), "beyond loopback")

		require.NoError(t, exposure(addr, false, true), "--http-insecure")
		require.NoError(t, exposure(addr, true, false), "a tokens file")
	}
	for _, addr := range []string{"127.0.0.1:8081", "localhost:0", "[::1]:8081", "127.8.9.1:1"} {
		require.NoError(t, exposure(addr, false, false), addr)
	}
	require.ErrorContains(t, exposure("no-port", false, false), "--http-addr")
}
