package faces_test

import (
	"encoding/json"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/signature"
)

// hookSim is the simulated provider of the webhooks test: jobs of about
// 10 s (500 s of model time at 50x), so they end around a NATS restart.
const hookSim = `
time_scale: 50
seed: 13
latency: 5ms
default: {queue_median: 2s, queue_sigma: 0.3, run_median: 500s, run_sigma: 0.2, fail_rate: 0.1}
`

// webhookSecret is what GET /v1/webhooks/default/secret answers token.
func (s *stack) webhookSecret(t *testing.T, token string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL+"/replicate/sim/v1/webhooks/default/secret", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var got struct{ Key string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	return got.Key
}

// Predictions created with webhooks through the pinned SDK, NATS
// restarted while they run: every
// delivery verifies with the SDK's own validateWebhook() and the secret
// webhooks.default.secret.get() answered, carries the prediction, and
// each app endpoint gets the events its filter asked for — a completed
// one for every job (none lost), a start one only where asked, and no
// logs where the filter left them out.
func TestReplicateWebhooksSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fleet and node")
	}
	t.Parallel()
	bin := e2etest.Binaries(t)
	natsNode, natsURL, js := e2etest.StoppableNATS(t, bin, t.TempDir())
	s := startWith(t, hookSim, natsURL, js)
	s.fleet.Launch("webhook", "webhook")
	const jobs = 30
	wait := startNode(t, "replicate.mjs", 150*time.Second, s.replicateEnv("webhooks", "JOBS=30", "DEADLINE_S=120")...)
	// Every job is at the provider, none ended: NATS goes away (SIGKILLed,
	// back on its store 5 s later) while they run and end.
	e2etest.WaitFor(t, "every job created at the provider", time.Minute, func() bool { return s.SimStats(t).Creates >= jobs })
	natsNode.Restart(syscall.SIGKILL, 5*time.Second)
	lines := wait()
	filters := map[int][]any{}
	ids := map[int]string{}
	got := map[int][]string{} // statuses delivered, by job, deduplicated on webhook-id
	seen := map[string]bool{}
	for _, l := range lines {
		n := int(l["n"].(float64))
		switch l["step"] {
		case "created":
			ids[n] = l["id"].(string)
			f, _ := l["filter"].([]any)
			filters[n] = f
		case "delivery":
			require.Equal(t, true, l["valid"], "validateWebhook: %v", l)
			if id := l["webhook_id"].(string); !seen[id] {
				seen[id] = true
				got[n] = append(got[n], l["status"].(string))
			}
		}
	}
	require.Len(t, ids, jobs)

	// Each token its own secret: the app's is derived from the server
	// secret and its name; the reader's differs.
	server, err := signature.ParseSecret(hookSecret)
	require.NoError(t, err)
	require.Equal(t, signature.FormatSecret(signature.DeriveSecret(server, "app")), s.webhookSecret(t, tokenApp))
	require.NotEqual(t, s.webhookSecret(t, tokenApp), s.webhookSecret(t, tokenRead))
	for n := range jobs {
		statuses := got[n]
		require.NotEmpty(t, statuses, "job %d got no delivery", n)
		last := statuses[len(statuses)-1]
		j := s.record(t, ids[n])
		require.Equal(t, map[string]string{"succeeded": "succeeded", "failed": "failed"}[string(j.State)], last, "job %d ends as its record: %v", n, statuses)
		ends := 0
		for _, st := range statuses {
			if st == "succeeded" || st == "failed" || st == "canceled" {
				ends++
			}
		}
		require.Equal(t, 1, ends, "job %d: one completed delivery: %v", n, statuses)
		switch len(filters[n]) {
		case 1: // completed only
			require.Equal(t, []string{last}, statuses, "job %d", n)
		case 2: // start and completed
			require.Equal(t, []string{"starting", last}, statuses, "job %d", n)
		default: // every event: start, then logs while it runs
			require.Equal(t, "starting", statuses[0], "job %d: %v", n, statuses)
		}
	}
}
