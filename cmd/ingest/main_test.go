package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Without tokens the front door listens on loopback only: any other
// address is refused at start, before NATS is reached, unless
// --http-insecure (or a tokens file) says otherwise — the rule of
// frontdoor.CheckExposure, which pollux serve follows too.
func TestFrontDoorBeyondLoopbackNeedsTokens(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("tok-aaaaaaaaaaaaaaaaaaaaaaaa act name=ops\n"), 0o600))
	missing := filepath.Join(t.TempDir(), "missing.yaml")
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

		// Allowed, it goes on to read its config (missing here) and stops there.
		for _, args := range [][]string{{"--http-insecure"}, {"--http-tokens-file", tokens}} {
			stderr.Reset()
			require.Equal(t, 1, run(append(args, "--config", missing, "--http-allowed-hosts", "pollux.internal,gw.example"), &stderr), "%s %v", addr, args)
			require.NotContains(t, stderr.String(), "beyond loopback", "%s %v", addr, args)
			require.Contains(t, stderr.String(), "missing.yaml", "%s %v", addr, args)
		}
		t.Run("POLLUX_HTTP_INSECURE", func(t *testing.T) {
			t.Setenv("POLLUX_HTTP_INSECURE", "true")
			var stderr bytes.Buffer
			require.Equal(t, 1, run([]string{"--config", missing}, &stderr), addr)
			require.NotContains(t, stderr.String(), "beyond loopback")
		})
	}
	var stderr bytes.Buffer
	require.Equal(t, 1, run([]string{"--http-addr", "127.0.0.1:0", "--config", missing}, &stderr), "loopback needs no tokens")
	require.NotContains(t, stderr.String(), "beyond loopback")

	stderr.Reset()
	require.Equal(t, 2, run([]string{"--http-addr", "127.0.0.1:0", "--http-allowed-hosts", "gw.example:80", "--config", missing}, &stderr))
	require.Contains(t, stderr.String(), `AllowedHosts: "gw.example:80"`, "the allow list is checked at start")
}
