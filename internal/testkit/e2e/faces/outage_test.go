package faces_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// outageSim is the simulated provider of the outage test: a long job
// (about 50 s, which ends while NATS is away) and short ones (about a
// second), none failing.
const outageSim = `
time_scale: 50
seed: 11
latency: 5ms
default: {queue_median: 2s, queue_sigma: 0.3, run_median: 50s, run_sigma: 0.2, fail_rate: 0}
models:
  outage/long: {queue_median: 2s, queue_sigma: 0.3, run_median: 2500s, run_sigma: 0.05, fail_rate: 0}
  outage/short: {queue_median: 2s, queue_sigma: 0.3, run_median: 50s, run_sigma: 0.2, fail_rate: 0}
`

// outageDown is how long NATS stays down: longer than every SDK's own
// retries, the faces' request timeout and the front door's hold of a
// create in doubt.
const outageDown = 60 * time.Second

// All three SDKs through a 60 s NATS outage (the server SIGKILLed and
// started again on its store): apps polling their jobs never see an
// error — a face answers a job it knows from what it last read (issue 37
// item 7) — and the long jobs, which end at the provider while NATS is
// away, reach their apps once it is back. Apps keep creating throughout:
// a create the face refuses made nothing, so every job the provider ran
// has an id some app received, each created once (item 8).
func TestFacesThroughANATSOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fleet, node, and a 60 s outage")
	}
	t.Parallel()
	begun := time.Now()
	bin := e2etest.Binaries(t)
	natsNode, natsURL, js := e2etest.StoppableNATS(t, bin, t.TempDir())
	s := startWith(t, outageSim, natsURL, js)
	const clients = 4 // per SDK
	stop := filepath.Join(t.TempDir(), "stop")
	scripts := map[string]func() []map[string]any{
		"replicate": startNode(t, "replicate.mjs", 5*time.Minute, s.replicateEnv("outage",
			"CLIENTS=4", "LONG_MODEL=outage/long", "SHORT_MODEL=outage/short", "STOP="+stop)...),
		"openai": startNode(t, "openai.mjs", 5*time.Minute, "MODE=outage", "POLLUX_URL="+s.URL, "TOKEN="+tokenApp,
			"CLIENTS=4", "LONG_MODEL=outage/long", "SHORT_MODEL=outage/short", "STOP="+stop),
		"fal": startNode(t, "fal.mjs", 5*time.Minute, falEnv(s, "outage",
			"FAL_CLIENTS=4", "FAL_LONG=outage/long", "FAL_SHORT=outage/short", "FAL_STOP="+stop)...),
	}

	// Every app's long job runs at the provider, and short ones are under
	// way: NATS goes away.
	e2etest.WaitFor(t, "every long job running", 2*time.Minute, func() bool {
		running := 0
		for _, p := range simPredictions(t, s) {
			if p.Model == "outage/long" && p.Status == "processing" {
				running++
			}
		}
		return running == 3*clients && s.SimStats(t).Creates > 3*clients
	})
	natsNode.Restart(syscall.SIGKILL, outageDown)
	createdBefore := s.SimStats(t).Creates
	e2etest.WaitFor(t, "creates made after the outage", 2*time.Minute, func() bool { return s.SimStats(t).Creates > createdBefore+3 })
	require.NoError(t, os.WriteFile(stop, nil, 0o600))

	held := map[string]bool{} // the ids the apps received
	createErrors := map[string]int{}
	for sdk, wait := range scripts {
		lines := wait()
		require.NotEmpty(t, lines, sdk)
		long := 0
		for _, l := range lines {
			id, _ := l["id"].(string)
			if id == "" {
				id, _ = l["requestId"].(string)
			}
			require.NotEmpty(t, id, "%s: %v", sdk, l)
			require.Contains(t, []any{"succeeded", "completed"}, l["status"], "%s: no app's poll failed through the outage: %v", sdk, l)
			require.False(t, held[id], "%s: %s received once", sdk, id)
			held[id] = true
			createErrors[sdk] += int(l["create_errors"].(float64))
			if l["kind"] == "long" {
				long++
			}
		}
		require.Equal(t, clients, long, "%s: every app's long job reached it", sdk)
		require.Positive(t, createErrors[sdk], "%s: creates were made while NATS was away", sdk)
	}

	// The provider's ground truth: every job it ran has an id an app
	// holds, created once.
	var ran []string
	for _, p := range simPredictions(t, s) {
		require.True(t, held[p.IdempotencyKey], "prediction %s (job %s, %s) has an id no app received", p.ID, p.IdempotencyKey, p.Model)
		ran = append(ran, p.IdempotencyKey)
	}
	slices.Sort(ran)
	require.Len(t, slices.Compact(ran), len(ran), "each job created once at the provider")
	require.Len(t, ran, len(held), "every id an app holds is a job the provider ran")
	settled := strings.Count(e2etest.ReadLog(t, s.Ingest), "A CREATE WAS ANSWERED 503 WHILE ITS SUBMISSION WAS IN DOUBT")
	t.Logf("NATS down %s: %d jobs, creates refused meanwhile %v, creates answered 503 in doubt and settled %d; wall time %s",
		outageDown, len(held), createErrors, settled, time.Since(begun).Round(time.Second))
}

// simPredictions is the simulated provider's every prediction.
func simPredictions(t *testing.T, s *stack) []sim.Prediction {
	t.Helper()
	var ps []sim.Prediction
	require.NoError(t, json.Unmarshal([]byte(e2etest.Get(t, "http://"+s.Sim+"/_sim/predictions")), &ps))
	return ps
}
