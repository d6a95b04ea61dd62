package fleet_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
)

// TestFrontDoorTokensProcess runs the ingest binary with its front door and
// a tokens file from the environment: a request without the token is
// refused, one with it is taken; a bad tokens file stops ingest at start
// with the line named and the token never printed.
func TestFrontDoorTokensProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	t.Parallel()
	bin := e2etest.Binaries(t)
	dir := t.TempDir()
	natsURL, _ := e2etest.NATSProcess(t, bin, dir)
	cfg := filepath.Join(dir, "pollux.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`
routes:
  sim:
    kind: replicate
    base_url: http://127.0.0.1:1
    token_env: SIM_TOKEN
`), 0o600))
	const token = "e2e-front-door-token-0123456789"
	tokens := filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("# clients\n"+token+"\n"), 0o600))
	addr := fmt.Sprintf("127.0.0.1:%d", e2etest.FreePort(t))
	env := []string{"SIM_TOKEN=x", "POLLUX_NATS_URL=" + natsURL, "POLLUX_CONFIG=" + cfg, "POLLUX_METRICS_ADDR=",
		"POLLUX_HTTP_ADDR=" + addr, "POLLUX_HTTP_TOKENS_FILE=" + tokens, "POLLUX_HTTP_ALLOWED_HOSTS=pollux.internal"}
	p := e2etest.Launch(t, "ingest", env, filepath.Join(bin, "ingest"))

	postAs := func(host, auth string) int {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/jobs",
			strings.NewReader(`{"route":"sim","id":"fd-1","v":1,"model":"o/m","input":{}}`))
		require.NoError(t, err)
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	post := func(auth string) int { return postAs("", auth) }
	e2etest.WaitFor(t, "the front door answering", 30*time.Second, func() bool { return post("") != 0 })
	require.Equal(t, http.StatusUnauthorized, post(""))
	require.Equal(t, http.StatusUnauthorized, post("Bearer not-the-token-at-all-0000"))
	require.Equal(t, http.StatusAccepted, post("Bearer "+token))
	// The allow list, given, is enforced along with the tokens.
	require.Equal(t, http.StatusAccepted, postAs("pollux.internal:8081", "Bearer "+token))
	require.Equal(t, http.StatusMisdirectedRequest, postAs("rebind.example:8081", "Bearer "+token))
	b, err := os.ReadFile(p.LogFile)
	require.NoError(t, err)
	require.NotContains(t, string(b), token, "the token never reaches a log line")

	// A bad file: ingest refuses to start, and says which line.
	require.NoError(t, os.WriteFile(tokens, []byte(token+"\nshort-secret\n"), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "ingest"))
	cmd.Env = append(append(os.Environ(), env...), "POLLUX_HTTP_ADDR=127.0.0.1:0") // the last of a name wins
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.Error(t, cmd.Run(), "ingest must not start with a bad tokens file")
	require.Contains(t, out.String(), "line 2")
	require.NotContains(t, out.String(), "short-secret")
	require.NotContains(t, out.String(), token)
}
