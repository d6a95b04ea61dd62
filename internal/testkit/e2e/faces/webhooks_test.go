package faces_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/signature"
)

// hookSim is the simulated provider of the webhooks test: jobs of about
// 10 s (500 s of model time at 50x), so they end around a NATS restart
// and a kill of the delivering process.
const hookSim = `
time_scale: 50
seed: 13
latency: 5ms
default: {queue_median: 2s, queue_sigma: 0.3, run_median: 500s, run_sigma: 0.25, fail_rate: 0.1}
`

// hookJobs is how many jobs with webhooks each face takes (the issue's
// size).
const hookJobs = 200

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

// Webhooks through the Replicate and fal faces at once, with the pinned
// SDKs: 200 predictions created with webhooks (three filters) and 200 fal
// requests submitted with a webhookUrl (each app's receiver answering in
// 100 ms, so deliveries are under way at any moment); the process that
// delivers webhooks (the webhook binary, which runs notify) SIGKILLed
// while it holds deliveries and started again, then NATS SIGKILLed and
// restarted while the jobs run and end. None is lost: every Replicate
// delivery verifies with the SDK's own validateWebhook() and the secret
// webhooks.default.secret.get() answered, and each app endpoint gets the events its filter asked for;
// every fal delivery verifies against Pollux's JWKS, fetched from the
// front door, with pkg/signature's FalVerifier pinned to the app (the
// verifier an app uses), and each request gets exactly one outcome (OK
// or ERROR, as its record ended), deduplicated on request id and status
// as fal asks of apps.
func TestWebhooksThroughTheFaces(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fleet and node")
	}
	t.Parallel()
	bin := e2etest.Binaries(t)
	natsNode, natsURL, js := e2etest.StoppableNATS(t, bin, t.TempDir())
	s := startWith(t, hookSim, natsURL, js)
	notifier := s.fleet.Launch("webhook", "webhook")
	evs := e2etest.FollowFleet(t, js)
	start := time.Now()
	waitReplicate := startNode(t, "replicate.mjs", 4*time.Minute, s.replicateEnv("webhooks", "JOBS=200", "DEADLINE_S=200", "HOOK_DELAY_MS=100")...)
	waitFal := startNode(t, "fal.mjs", 4*time.Minute, falEnv(s, "webhooks", "FAL_JOBS=200", "FAL_DEADLINE_S=200", "HOOK_DELAY_MS=100")...)

	e2etest.WaitFor(t, "every job created at the provider", 2*time.Minute, func() bool { return s.SimStats(t).Creates >= 2*hookJobs })
	t.Logf("every job created: %s", time.Since(start).Round(time.Second))
	// Once a quarter of them have ended, the delivering process is
	// SIGKILLed while it holds deliveries (taken from the outbox, not yet
	// acknowledged), and another takes over a second later; then NATS goes
	// away (SIGKILLed, back on its store 5 s later) while the rest run and
	// end. Both faults' waits (the dead process's deliveries come back
	// after their ack wait, the event copier's after its own) overlap.
	e2etest.WaitFor(t, "a quarter of the jobs ended", 2*time.Minute, func() bool { return len(evs.Terminal()) >= 2*hookJobs/4 })
	held := 0
	e2etest.WaitFor(t, "deliveries under way", time.Minute, func() bool {
		c, err := js.Consumer(t.Context(), events.Default.OutboxStream(), events.Default.Prefix()+"-notify-"+config.NotifySubmissions)
		if err != nil {
			return false
		}
		info, err := c.Info(t.Context())
		held = 0
		if err == nil {
			held = info.NumAckPending
		}
		return held > 0
	})
	t.Logf("the delivering process SIGKILLed holding %d deliveries, %d jobs ended: %s", held, len(evs.Terminal()), time.Since(start).Round(time.Second))
	notifier.Kill(t)
	<-time.After(time.Second)
	s.fleet.Launch("webhook-2", "webhook")
	natsNode.Restart(syscall.SIGKILL, 5*time.Second)
	t.Logf("NATS back, %d jobs ended: %s", len(evs.Terminal()), time.Since(start).Round(time.Second))

	replicateLines, falLines := waitReplicate(), waitFal()
	t.Logf("every app got its deliveries: %s", time.Since(start).Round(time.Second))
	checkReplicateHooks(t, s, replicateLines)
	checkFalHooks(t, s, falLines)
	t.Logf("%d jobs with webhooks through two faces, a NATS restart and a kill of the delivering process: %s", 2*hookJobs, time.Since(start).Round(time.Second))
}

// checkReplicateHooks checks replicate.mjs webhooks' lines: each
// delivery verified by validateWebhook(), and each job's deliveries
// (deduplicated on webhook-id) those its filter asked for, ending as its
// record did.
func checkReplicateHooks(t *testing.T, s *stack, lines []map[string]any) {
	t.Helper()
	filters := map[int][]any{}
	ids := map[int]string{}
	got := map[int][]string{} // statuses delivered, by job, deduplicated on webhook-id
	seen := map[string]bool{}
	arrived := 0
	for _, l := range lines {
		n := int(l["n"].(float64))
		switch l["step"] {
		case "created":
			ids[n] = l["id"].(string)
			f, _ := l["filter"].([]any)
			filters[n] = f
		case "delivery":
			arrived++
			require.Equal(t, true, l["valid"], "validateWebhook: %v", l)
			if id := l["webhook_id"].(string); !seen[id] {
				seen[id] = true
				got[n] = append(got[n], l["status"].(string))
			}
		}
	}
	require.Len(t, ids, hookJobs)

	// Each token its own secret: the app's is derived from the server
	// secret and its name; the reader's differs.
	server, err := signature.ParseSecret(hookSecret)
	require.NoError(t, err)
	require.Equal(t, signature.FormatSecret(signature.DeriveSecret(server, "app")), s.webhookSecret(t, tokenApp))
	require.NotEqual(t, s.webhookSecret(t, tokenApp), s.webhookSecret(t, tokenRead))
	for n := range hookJobs {
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
	t.Logf("replicate: %d deliveries arrived, %d distinct (webhook-id)", arrived, len(seen))
}

// falHook is what a fal webhook delivery's body says.
type falHook struct {
	RequestID        string          `json:"request_id"`
	GatewayRequestID string          `json:"gateway_request_id"`
	Status           string          `json:"status"`
	Error            *string         `json:"error"`
	Payload          json.RawMessage `json:"payload"`
}

// checkFalHooks checks fal.mjs webhooks' lines: every delivery verifies
// against the front door's JWKS for the app, and each request has exactly
// one outcome once deduplicated on request id and status — OK with its
// outputs for a success, ERROR for a failure, as its record ended.
func checkFalHooks(t *testing.T, s *stack, lines []map[string]any) {
	t.Helper()
	// Verified after the run, not on receipt: the window is widened past
	// the test's length; everything else is the verifier's default.
	v, err := signature.NewFalVerifier(signature.FalVerifier{JWKSURL: s.URL + frontdoor.FalJWKSPath, UserID: "app", Tolerance: 15 * time.Minute})
	require.NoError(t, err)
	ids := map[int]string{}
	outcomes := map[int]map[string]falHook{} // by request, by status
	arrived := 0
	for _, l := range lines {
		n := int(l["n"].(float64))
		switch l["op"] {
		case "created":
			ids[n] = l["requestId"].(string)
			require.Equal(t, ids[n], l["gatewayRequestId"], "a webhook submit's answer carries gateway_request_id")
		case "delivery":
			arrived++
			h := http.Header{}
			for k, val := range l["headers"].(map[string]any) {
				h.Set(k, val.(string))
			}
			body, err := base64.StdEncoding.DecodeString(l["body"].(string))
			require.NoError(t, err)
			rid, err := v.Verify(t.Context(), h, body)
			require.NoError(t, err, "delivery %d verifies against Pollux's JWKS", n)
			var hook falHook
			require.NoError(t, json.Unmarshal(body, &hook))
			require.Equal(t, rid, hook.RequestID, "the signed request id is the body's")
			require.Equal(t, hook.RequestID, hook.GatewayRequestID)
			if outcomes[n] == nil {
				outcomes[n] = map[string]falHook{}
			}
			outcomes[n][hook.Status] = hook
		}
	}
	require.Len(t, ids, hookJobs)
	distinct := 0
	for n := range hookJobs {
		require.Len(t, outcomes[n], 1, "request %d: exactly one outcome: %v", n, outcomes[n])
		distinct++
		j := s.record(t, ids[n])
		want := map[string]string{"succeeded": "OK", "failed": "ERROR"}[string(j.State)]
		hook, ok := outcomes[n][want]
		require.True(t, ok, "request %d ended %s: want %s, got %v", n, j.State, want, outcomes[n])
		require.Equal(t, ids[n], hook.RequestID, "request %d: its own delivery, to its own webhook", n)
		if want == "OK" {
			var p struct{ Files []struct{ URL string } }
			require.NoError(t, json.Unmarshal(hook.Payload, &p))
			require.Len(t, p.Files, len(j.Outputs), "request %d: the result's files", n)
			require.Nil(t, hook.Error)
		} else {
			require.NotNil(t, hook.Error)
			require.NotEmpty(t, hook.Payload)
		}
	}
	t.Logf("fal: %d deliveries arrived, %d distinct (request id, status)", arrived, distinct)
}
