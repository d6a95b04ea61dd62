package crash_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/platform/faultpoint"
	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// TestInDoubtCreateIsFoundAfterACrash kills ingest after the simulated
// provider accepted a create and before the answer was recorded, at a
// provider that does not deduplicate but whose prediction list shows each
// prediction's webhook URL. The ingest started after it finds the
// submission in doubt, looks it up by the job's webhook URL, and follows
// the prediction it finds: the job ends in the provider's state, created
// once.
func TestInDoubtCreateIsFoundAfterACrash(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := e2etest.StartSimFleet(t, e2etest.SimFleetConfig{
		Token:     "doubt-token",
		TimeScale: 50,
		Sim: `
time_scale: 50
seed: 7
default: {queue_median: 2s, queue_sigma: 0.1, run_median: 10s, run_sigma: 0.1, fail_rate: 0}
faults: {not_idempotent: true}
`,
		Config: `
streams: {intake_ack_wait: 2s}
routes:
  sim:
    kind: replicate
    base_url: http://{{sim}}
    token_env: SIM_TOKEN
    webhook_url: http://{{webhook}}/webhooks/sim
    call_timeout: 1s
    options: {find_by_webhook: true}
`,
	})
	js, simURL := f.JS, f.SimURL
	for _, name := range []string{"poller", "webhook"} {
		f.Launch(name, name)
	}
	log := e2etest.FollowFleet(t, js)

	// The first ingest dies right after the provider's create answer.
	crashing := f.Launch("ingest-crashing", "ingest", faultpoint.Env+"=after-submit:1")
	id := events.KeyID("sim", "doubt-1")
	msg, err := json.Marshal(events.Submit{V: 1, IdempotencyKey: "doubt-1", Model: "doubt/model", Input: json.RawMessage(`{"prompt":"once"}`)})
	require.NoError(t, err)
	_, err = js.Publish(context.Background(), events.Default.Submit("sim"), msg)
	require.NoError(t, err)
	select {
	case <-crashing.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("ingest did not crash at after-submit")
	}
	require.Contains(t, e2etest.ReadLog(t, crashing), "faultpoint after-submit: crashing")
	require.Equal(t, 1, e2etest.SimStats(t, simURL).Creates, "the provider has the job")

	res, err := events.Default.Open(context.Background(), js)
	require.NoError(t, err)
	owner := jobs.New(events.Default, js, res, jobs.Config{})
	j, err := owner.Get(context.Background(), id)
	require.NoError(t, err)
	require.True(t, j.SubmitInDoubt, "the record does not know the create's answer")
	require.Empty(t, j.RemoteID)

	// The next ingest takes the submission up again.
	f.Launch("ingest", "ingest")
	e2etest.WaitTerminal(t, js, log, []string{id}, 90*time.Second)

	var truth []sim.Prediction
	require.NoError(t, json.Unmarshal([]byte(e2etest.Get(t, simURL+"/_sim/predictions")), &truth))
	require.Len(t, truth, 1, "created once")
	st := e2etest.SimStats(t, simURL)
	require.Equal(t, 1, st.Creates, "no second create")
	require.Positive(t, st.ListCalls, "the job was looked up")
	j, err = owner.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, truth[0].ID, j.RemoteID, "the job follows the prediction the crashed create made")
	require.Equal(t, state.Succeeded, j.State)
	require.Equal(t, truth[0].Status, string(j.State), "the job ends in the provider's state")
	require.Len(t, log.Terminal()[id], 1, "one terminal event")
}
