package faces_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
)

// What docs/faces.md says of an SDK that retries a create without a key:
// the gateway dies after the submission is durable and before it
// answers; the SDK retries (openai on a broken connection, the fal client
// too), the restarted gateway takes the retry as a new create, and the
// provider runs two jobs — the one whose answer was lost, and the one the
// app knows. With a key (the keyed tests) it is one.
func TestKeylessRetriesAcrossAGatewayCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fleet and node")
	}
	t.Parallel()
	s := start(t)
	for _, c := range []struct {
		name, script string
		env          []string
		idField      string
	}{
		{"openai", "openai.mjs", []string{"POLLUX_URL=" + s.URL, "TOKEN=" + tokenApp, "MODE=keyless"}, "id"},
		{"fal", "fal.mjs", falEnv(s, "keyless"), "request_id"},
	} {
		before := s.SimStats(t).Creates
		s.Ingest.Kill(t)
		crashing := s.startCrashingIngest(t)
		wait := startNode(t, c.script, 90*time.Second, c.env...)
		select {
		case <-crashing.Done():
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: the gateway did not crash after the create's submission", c.name)
		}
		s.StartIngest(t)
		lines := wait()
		require.Len(t, lines, 1, "%s: the SDK's retry was answered", c.name)
		id, _ := lines[0][c.idField].(string)
		require.NotEmpty(t, id)
		e2etest.WaitFor(t, c.name+": the job the app knows is created", 30*time.Second, func() bool {
			j := s.lookup(t, id)
			return j != nil && j.RemoteID != ""
		})
		e2etest.WaitFor(t, c.name+": two jobs at the provider", 30*time.Second, func() bool { return s.SimStats(t).Creates == before+2 })
		t.Logf("%s: one keyless create, retried by the SDK across a gateway crash: %d jobs at the provider", c.name, s.SimStats(t).Creates-before)
	}
}
