package faces_test

import (
	"encoding/base32"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/state"
)

// tokenSlow may act, one request a second across the fleet.
const tokenSlow = "faces-slow-token-0123456789abcdef"

// replicateEnv is the environment of examples/sdks/replicate.mjs.
func (s *stack) replicateEnv(mode string, env ...string) []string {
	return append([]string{"MODE=" + mode, "POLLUX_URL=" + s.URL, "POLLUX_TOKEN=" + tokenApp, "READ_TOKEN=" + tokenRead, "SLOW_TOKEN=" + tokenSlow}, env...)
}

// requireResult checks what an SDK call reported against the job's record:
// the output of a success, the error of a failure.
func (s *stack) requireResult(t *testing.T, line map[string]any) {
	t.Helper()
	id, _ := line["id"].(string)
	require.NotEmpty(t, id, "%v", line)
	j := s.record(t, id)
	switch j.State {
	case state.Succeeded:
		require.Equal(t, "succeeded", line["status"], "%v", line)
		require.Len(t, j.Outputs, 1)
		require.Equal(t, j.Outputs[0], line["output"], "the record's output reached the client: %v", line)
	case state.Failed:
		require.Equal(t, "failed", line["status"], "%v", line)
		require.Contains(t, line["error"], "Prediction failed", "%v", line)
	default:
		t.Fatalf("job %s is %s, the client says %v", id, j.State, line)
	}
}

// The SDK's own calls, end to end: run() blocking (Prefer: wait) and
// polling, predictions.create/get/cancel and wait(); and the errors it
// throws for what the face refuses.
func TestReplicateSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fleet and node")
	}
	t.Parallel()
	s := start(t)
	f, err := os.OpenFile(s.tokens, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(tokenSlow + " act name=slow app=app rate=1\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	steps := byField("step", node(t, "replicate.mjs", 60*time.Second, s.replicateEnv("main")...))
	s.requireResult(t, steps["run-block"])
	s.requireResult(t, steps["run-poll"])
	cgw := steps["create-get-wait"]
	require.Equal(t, "starting", cgw["created"])
	require.Equal(t, cgw["id"], cgw["got"])
	s.requireResult(t, cgw)
	require.Regexp(t, `^[a-z2-7]{26}$`, cgw["id"])
	require.Equal(t, s.URL+"/replicate/sim/v1/predictions/"+cgw["id"].(string), cgw["urls"].(map[string]any)["get"])
	c := steps["cancel"]
	require.Equal(t, "canceled", c["status"], "%v", c)
	require.Equal(t, state.Canceled, s.record(t, c["id"].(string)).State)
	for _, step := range []string{"run-block", "run-poll", "create-get-wait", "cancel"} {
		j := s.record(t, steps[step]["id"].(string))
		require.Equal(t, "replicate", j.Metadata["face"], step)
		require.Equal(t, "app", j.SubmittedBy, "who acts is the token's name")
	}

	errs := byField("step", node(t, "replicate.mjs", 60*time.Second, s.replicateEnv("errors")...))
	for step, want := range map[string]struct {
		status int
		says   string
	}{
		"wrong-token":     {401, "Unauthenticated"},
		"read-only-token": {403, "Permission denied"},
		"no-input":        {422, `"field":"input"`},
		"webhook":         {422, `"field":"webhook"`},
		"unknown-id":      {404, "Not found"},
		"read-only-get":   {404, "Not found"},
		"quota":           {429, "Too many requests"},
	} {
		got := errs[step]
		require.NotNil(t, got, "step %s", step)
		require.Equal(t, "ApiError", got["name"], "%s: %v", step, got)
		require.Equal(t, float64(want.status), got["status"], "%s: %v", step, got)
		require.Contains(t, got["message"], want.says, "%s: %v", step, got)
	}
	require.NotEmpty(t, errs["quota"]["retry_after"], "a 429 says when to retry")
}

// 50 SDK clients, 200 jobs: every result reaches its client, and the
// provider sees Pollux's own status calls, none of the clients' polls.
func TestReplicateSDKUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fleet and node")
	}
	t.Parallel()
	s := start(t)
	lines := node(t, "replicate.mjs", 90*time.Second, s.replicateEnv("load", "CLIENTS=50", "JOBS=200")...)
	ids := map[string]bool{}
	for _, l := range lines {
		require.Equal(t, "load", l["step"])
		s.requireResult(t, l)
		ids[l["id"].(string)] = true
	}
	require.Len(t, ids, 200, "every job reached its client, once")

	// The SDK's paginate(predictions.list) walks every prediction the
	// face made, a hundred a page, following the face's next URLs.
	listed := map[string]bool{}
	pages := 0.0
	for _, l := range node(t, "replicate.mjs", 30*time.Second, s.replicateEnv("list")...) {
		if l["step"] == "pages" {
			pages = l["pages"].(float64)
			continue
		}
		require.False(t, listed[l["id"].(string)], "listed once: %v", l)
		listed[l["id"].(string)] = true
	}
	require.Equal(t, ids, listed, "the list is the face's predictions")
	require.Equal(t, 2.0, pages)

	// The provider's ground truth: its status calls are the ones Pollux's
	// records count (exact once every check has ended), whatever the
	// clients polled.
	var polls int
	require.Eventually(t, func() bool {
		polls = 0
		for id := range ids {
			j := s.record(t, id)
			if j.PollsOpen {
				return false
			}
			polls += j.Polls
		}
		return polls == s.SimStats(t).StatusCalls
	}, 30*time.Second, 500*time.Millisecond, "sim status calls %d, Pollux's polls %d", s.SimStats(t).StatusCalls, polls)
	st := s.SimStats(t)
	require.Equal(t, 200, st.Creates)
	require.Zero(t, st.DuplicateCreates)
	t.Logf("200 jobs, 50 clients: %d status calls at the provider (%.1f a job)", st.StatusCalls, float64(st.StatusCalls)/200)
}

// A create carrying an Idempotency-Key, whose gateway dies after the
// submission is durable and before the answer, retried by the app: one
// job, one create at the provider. The SDK's own keyless create throws
// (or a retry of it, made at once, reaches the new gateway: a second job),
// and the job it asked for runs all the same.
func TestReplicateCreateAcrossAGatewayCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fleet and node")
	}
	t.Parallel()
	s := start(t)
	// A submission the dead gateway had taken is taken again after
	// intake_ack_wait: 2s for this test (the harness's route settles a
	// create in doubt after its call_timeout, 2s).
	cfg := s.fleet.ConfigPath
	b, err := os.ReadFile(cfg)
	require.NoError(t, err)
	conf := strings.Replace(string(b), "intake_ack_wait: 6s", "intake_ack_wait: 2s", 1)
	require.NotEqual(t, string(b), conf)
	require.NoError(t, os.WriteFile(cfg, []byte(conf), 0o600))

	const key = "order-42"
	s.Ingest.Kill(t)
	crashing := s.startCrashingIngest(t)
	// A message is redelivered after the ack wait it was delivered with.
	e2etest.WaitFor(t, "the intake consumer's 2s ack wait", 30*time.Second, func() bool {
		c, err := s.JS.Consumer(t.Context(), "POLLUX_INTAKE", "ingest-sim")
		return err == nil && c.CachedInfo().Config.AckWait == 2*time.Second
	})
	wait := startNode(t, "replicate.mjs", 90*time.Second, s.replicateEnv("keyed", "KEY="+key)...)
	select {
	case <-crashing.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the gateway did not crash after the create's submission")
	}
	s.StartIngest(t)
	keyed := byField("step", wait())["keyed"]
	require.NotNil(t, keyed)
	require.GreaterOrEqual(t, keyed["create_attempts"], float64(2), "the create was retried: %v", keyed)
	want := base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding).
		EncodeToString(face.IDBytes(appCtx, face.Replicate, "sim", key, 16))
	require.Equal(t, want, keyed["id"], "the key makes the id")
	s.requireResult(t, keyed)
	st := s.SimStats(t)
	// The dead gateway's own ingest may have sent the create as it died:
	// in doubt, it is sent again with its key, and this provider dedupes
	// keys (a replay counts as a create, and makes no prediction).
	t.Logf("creates %d, sent again with their key %d", st.Creates, st.DuplicateCreates)
	require.Equal(t, 1, st.Predictions, "one job at the provider")

	s.Ingest.Kill(t)
	crashing = s.startCrashingIngest(t)
	wait = startNode(t, "replicate.mjs", 90*time.Second, s.replicateEnv("keyless")...)
	select {
	case <-crashing.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the gateway did not crash after the create's submission")
	}
	s.StartIngest(t)
	keyless := byField("step", wait())["keyless"]
	require.NotNil(t, keyless)
	// The SDK tries the broken create five times more at once: they
	// usually all fail before the new gateway listens, and it throws; one
	// that reaches it is a second job (no key), as docs/faces.md says.
	jobs := 2
	if keyless["name"] != "TypeError" {
		p, ok := keyless["unexpected"].(map[string]any)
		require.True(t, ok, "the SDK throws the broken connection or answers a retry: %v", keyless)
		require.NotEmpty(t, p["id"])
		t.Logf("a keyless retry reached the new gateway: job %v", p["id"])
		jobs = 3
	} else {
		require.Contains(t, keyless["message"], "fetch failed")
	}
	require.Eventually(t, func() bool { return s.SimStats(t).Predictions == jobs }, 30*time.Second, 100*time.Millisecond,
		"the submission was durable: the job runs, though its id never reached the app")
}
