package faces_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/signature"
)

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

// Predictions created with webhooks through the pinned SDK: every
// delivery verifies with the SDK's own validateWebhook() and the secret
// webhooks.default.secret.get() answered, carries the prediction, and
// each app endpoint gets the events its filter asked for — a completed
// one for every job, a start one only where asked, and no logs where the
// filter left them out.
func TestReplicateWebhooksSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fleet and node")
	}
	t.Parallel()
	s := start(t)
	s.fleet.Launch("webhook", "webhook")
	const jobs = 30
	lines := node(t, "replicate.mjs", 120*time.Second, s.replicateEnv("webhooks", "JOBS=30", "DEADLINE_S=90")...)
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
