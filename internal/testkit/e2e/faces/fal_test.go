package faces_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// falEnv is examples/sdks/fal.mjs's environment for mode.
func falEnv(s *stack, mode string, extra ...string) []string {
	return append([]string{"POLLUX_URL=" + s.URL, "POLLUX_TOKEN=" + tokenApp, "POLLUX_READ_TOKEN=" + tokenRead, "FAL_MODE=" + mode}, extra...)
}

// field walks m along keys.
func field(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

// requireOutcome checks that what the client got for a request is its
// record's outcome: the output of a succeeded job, else the error fal's
// client throws for it.
func requireOutcome(t *testing.T, s *stack, line map[string]any) *state.Job {
	t.Helper()
	id, _ := line["requestId"].(string)
	require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, id, "%v", line)
	j := s.record(t, id)
	require.True(t, j.State.Terminal(), "%s is %s", id, j.State)
	require.Equal(t, "fal", j.Metadata["face"])
	switch j.State {
	case state.Succeeded:
		require.Nil(t, line["error"], "%v", line)
		require.Equal(t, id, line["resultRequestId"])
		require.NotEmpty(t, j.Outputs)
		require.Equal(t, j.Outputs[0], field(line, "data", "video", "url"), "%v", line)
	case state.Failed:
		require.Equal(t, "ApiError", field(line, "error", "name"), "%v", line)
		require.InDelta(t, 500, field(line, "error", "status"), 0, "%v", line)
		require.Equal(t, j.Reason, field(line, "error", "body", "detail"))
	case state.Canceled:
		require.InDelta(t, 499, field(line, "error", "status"), 0, "%v", line)
		require.Equal(t, "client_cancelled", field(line, "error", "body", "error_type"))
	default:
		t.Fatalf("request %s ended %s: %v", id, j.State, line)
	}
	return j
}

// The fal client's calls — subscribe, queue.submit/status/result/cancel —
// end to end through the face, each answer the job's record; and its
// errors: a wrong or read-only token, a malformed input, a foreign
// x-fal-target-url (refused, never fetched), an unknown request.
func TestFalClient(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	t.Parallel()
	s := start(t)

	ops := byField("op", node(t, "fal.mjs", 90*time.Second, falEnv(s, "main")...))
	sub := ops["subscribe"]
	require.Equal(t, "COMPLETED", last(sub["statuses"]), "subscribe polls until COMPLETED: %v", sub)
	requireOutcome(t, s, sub)

	q := ops["queue"]
	id := field(q, "submitted", "request_id").(string)
	require.Equal(t, "https://queue.fal.run/acme/video/requests/"+id+"/status", field(q, "submitted", "status_url"))
	require.Equal(t, "COMPLETED", field(q, "status", "status"))
	require.IsType(t, []any{}, field(q, "status", "logs"), "logs=1: a list")
	q["requestId"] = id
	rec := requireOutcome(t, s, q)
	require.Equal(t, "acme/video", rec.Model)
	require.Equal(t, "app", rec.SubmittedBy, "who acts is the token's name")

	c := ops["cancel"]
	require.Equal(t, "accepted", c["cancel"], "%v", c)
	requireOutcome(t, s, c)
	require.InDelta(t, 400, field(c, "again", "status"), 0, "%v", c)
	require.Equal(t, "ALREADY_COMPLETED", field(c, "again", "body", "status"))

	bad := ops["refused"]
	j := s.record(t, bad["requestId"].(string))
	require.Equal(t, state.Failed, j.State)
	require.Empty(t, j.RemoteID, "the provider never had it")
	require.Equal(t, "ValidationError", field(bad, "error", "name"), "%v", bad)
	require.InDelta(t, 422, field(bad, "error", "status"), 0)

	ops = byField("op", node(t, "fal.mjs", 60*time.Second, falEnv(s, "errors")...))
	for op, want := range map[string]float64{"wrong-token": 401, "read-only-submit": 403, "read-only-cancel": 403, "unknown-request": 404} {
		require.Equal(t, "ApiError", field(ops[op], "error", "name"), "%s: %v", op, ops[op])
		require.InDelta(t, want, field(ops[op], "error", "status"), 0, "%s: %v", op, ops[op])
		require.NotEmpty(t, field(ops[op], "error", "body", "detail"), "%s: fal's shape", op)
	}
	require.Equal(t, "IN_QUEUE", field(ops["no-slash"], "ok", "status"), "the proxy URL without its slash is redirected (307) to it: %v", ops["no-slash"])
	require.Contains(t, []any{"IN_QUEUE", "IN_PROGRESS", "COMPLETED"}, field(ops["read-only-status"], "ok", "status"), "a read-only token reads")
	m := ops["malformed"]
	require.Equal(t, "ValidationError", field(m, "error", "name"), "%v", m)
	require.InDelta(t, 422, field(m, "error", "status"), 0)
	require.Equal(t, []any{"body"}, field(m, "error", "fieldErrors").([]any)[0].(map[string]any)["loc"])
	w := ops["bad-webhook"]
	require.Equal(t, "ValidationError", field(w, "error", "name"), "%v", w)
	require.InDelta(t, 422, field(w, "error", "status"), 0)
	require.Equal(t, []any{"query", "fal_webhook"}, field(w, "error", "fieldErrors").([]any)[0].(map[string]any)["loc"])
	foreign := 0
	for op, l := range ops {
		if !strings.HasPrefix(op, "foreign ") {
			continue
		}
		foreign++
		require.InDelta(t, 412, field(l, "error", "status"), 0, "%s: %v", op, l)
		require.Contains(t, field(l, "error", "message"), "x-fal-target-url", op)
	}
	require.Equal(t, 6, foreign)
	require.InDelta(t, 0, ops["trap"]["hits"], 0, "nothing is forwarded")
}

func last(v any) any {
	l, _ := v.([]any)
	if len(l) == 0 {
		return nil
	}
	return l[len(l)-1]
}

// 50 clients polling at the client's default interval, 200 jobs: every
// result reaches its client, and the provider sees Pollux's own status
// calls (the records' polls), not the clients'.
func TestFalClientsCostTheProviderNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	t.Parallel()
	s := start(t)
	lines := node(t, "fal.mjs", 120*time.Second, falEnv(s, "many", "FAL_CLIENTS=50", "FAL_JOBS_EACH=4")...)
	require.Len(t, lines, 200)
	ids := map[string]bool{}
	for _, l := range lines {
		requireOutcome(t, s, l)
		ids[l["requestId"].(string)] = true
	}
	require.Len(t, ids, 200)

	var polls int
	e2etest.WaitFor(t, "every record's polls counted", 30*time.Second, func() bool {
		polls = 0
		for id := range ids {
			j := s.record(t, id)
			if j.PollsOpen {
				return false
			}
			polls += j.Polls
		}
		return true
	})
	st := s.SimStats(t)
	require.Equal(t, 200, st.Creates)
	require.Equal(t, polls, st.StatusCalls, "the provider's status calls are Pollux's own")
	t.Logf("200 jobs, 50 clients polling every 500 ms: %d provider status calls (%.2f per job)", st.StatusCalls, float64(st.StatusCalls)/200)
}

// Submits with an Idempotency-Key, with the gateway SIGKILLed under them
// and restarted: the client retries (its own retries, then the app's),
// and each key is one job the provider creates once.
func TestFalKeyedSubmitsSurviveAGatewayKill(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	t.Parallel()
	s := start(t)
	const jobs = 60
	killed := make(chan time.Duration, 1)
	begun := time.Now()
	go func() {
		defer close(killed)
		// Once a fifth of the submits are in the intake stream, freeze
		// the gateway, so that each client's next submit hangs in it
		// (each sends one every 100 ms), then kill it under them. Plain
		// code, not require: this is not the test's goroutine.
		if !e2etest.Eventually(func() bool { return intakeMsgs(t, s) >= jobs/5 }, 60*time.Second) {
			return
		}
		_ = s.Ingest.Cmd.Process.Signal(syscall.SIGSTOP)
		<-time.After(time.Second) // the clients' next submits hang in the frozen gateway
		_ = s.Ingest.Cmd.Process.Signal(syscall.SIGKILL)
		<-s.Ingest.Done()
		killed <- time.Since(begun)
		s.StartIngest(t)
	}()
	lines := node(t, "fal.mjs", 120*time.Second, falEnv(s, "keyed", "FAL_JOBS=60")...)
	done := time.Since(begun)
	at, ok := <-killed
	require.True(t, ok, "the gateway was never killed")
	t.Logf("the gateway was killed %s in; the client was done after %s", at, done)
	require.Len(t, lines, jobs)
	ids, attempts, inDoubt := map[string]bool{}, 0, 0
	for _, l := range lines {
		j := requireOutcome(t, s, l)
		ids[j.ID] = true
		require.Equal(t, l["key"], j.IdempotencyKey)
		attempts += int(l["attempts"].(float64))
		if j.SubmitAttempts > 1 {
			inDoubt++
		}
	}
	require.Len(t, ids, jobs, "one request per key")
	require.GreaterOrEqual(t, attempts, jobs+6, "each of the 6 clients had a submit in the gateway when it was killed, and sent it again")
	st := s.SimStats(t)
	require.Equal(t, jobs, st.Predictions, "the provider has one job per key")
	require.LessOrEqual(t, st.DuplicateCreates, inDoubt,
		"a create sent twice is Pollux's own retry of a create in doubt (with the job's key, which the provider dedupes), never the client's")
	t.Logf("%d submits for %d keys; the provider saw %d creates, %d of them repeated by Pollux for a create in doubt", attempts, jobs, st.Creates, st.DuplicateCreates)
}

// intakeMsgs is the number of messages the intake stream has taken (its
// last sequence; 0 when it cannot say).
func intakeMsgs(t *testing.T, s *stack) uint64 {
	st, err := s.JS.Stream(t.Context(), events.Default.IntakeStream())
	if err != nil {
		return 0
	}
	info, err := st.Info(t.Context())
	if err != nil {
		return 0
	}
	return info.State.LastSeq
}
