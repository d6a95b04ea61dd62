package faces_test

import (
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
)

// The openai SDK (openai@7.59.0), unchanged but for its base URL and key,
// against the OpenAI face of the real binaries: its calls work end to end,
// its errors are the SDK's own, a keyed create retried across a SIGKILL of
// the gateway is one job, and 50 polling clients cost the provider only
// Pollux's own status calls.
func TestOpenAIFace(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	t.Parallel()
	s := start(t)
	env := []string{"POLLUX_URL=" + s.URL, "TOKEN=" + tokenApp, "READ_TOKEN=" + tokenRead}
	var ids []string

	// create, poll by openai-poll-after-ms, downloadContent (the sim's
	// file, through the face's redirect), delete, 404s.
	lines := node(t, "openai.mjs", 60*time.Second, append(env, "MODE=main", "MODEL=openai/sora-content")...)
	require.Len(t, lines, 6, "%v", lines)
	created := lines[0]["video"].(map[string]any)
	require.Regexp(t, `^video_[0-9a-f]{32}$`, created["id"])
	require.Equal(t, "queued", created["status"])
	require.Equal(t, "8", created["seconds"])
	require.Equal(t, "1280x720", created["size"])
	require.Equal(t, "openai/sora-content", created["model"])
	require.NotEmpty(t, lines[0]["poll_after"], "openai-poll-after-ms on the create")
	done := lines[1]["video"].(map[string]any)
	require.Equal(t, "completed", done["status"], "%v", lines[1])
	require.Equal(t, 100.0, done["progress"])
	require.NotNil(t, done["completed_at"])
	require.Equal(t, map[string]any{"step": "content", "status": 200.0, "redirected": true, "type": "video/mp4", "bytes": 4096.0}, lines[2])
	del := lines[3]
	require.Equal(t, map[string]any{"id": del["after"].(map[string]any)["id"], "object": "video.deleted", "deleted": true}, del["deleted"])
	after := del["after"].(map[string]any)
	require.Equal(t, "failed", after["status"], "a deleted video was canceled: %v", after)
	require.Equal(t, "video_canceled", after["error"].(map[string]any)["code"])
	for _, l := range lines[4:] {
		e := l["error"].(map[string]any)
		require.Equal(t, "NotFoundError", e["class"], "%v", l)
		require.Equal(t, 404.0, e["status"])
	}
	ids = append(ids, created["id"].(string), after["id"].(string))

	// The SDK surfaces the face's refusals as it would OpenAI's.
	errs := map[string]map[string]any{}
	for _, l := range node(t, "openai.mjs", 30*time.Second, append(env, "MODE=errors")...) {
		e, _ := l["error"].(map[string]any)
		require.NotNil(t, e, "%v must fail", l["name"])
		errs[l["name"].(string)] = e
	}
	for name, want := range map[string][4]any{
		"wrong_token":   {"AuthenticationError", 401.0, "invalid_api_key", nil},
		"read_only":     {"PermissionDeniedError", 403.0, "insufficient_permissions", nil},
		"no_prompt":     {"BadRequestError", 400.0, "missing_required_parameter", "prompt"},
		"bad_seconds":   {"BadRequestError", 400.0, "invalid_value", "seconds"},
		"bad_reference": {"BadRequestError", 400.0, "invalid_file_format", "input_reference"},
	} {
		e := errs[name]
		require.Equal(t, want[0], e["class"], "%s: %v", name, e)
		require.Equal(t, want[1], e["status"], name)
		require.Equal(t, want[2], e["code"], name)
		require.Equal(t, want[3], e["param"], name)
		require.Equal(t, "invalid_request_error", e["type"], name)
	}

	ids = append(ids, keyedAcrossAKill(t, s, env)...)

	// 50 clients, 200 videos, each client polling at the interval the
	// face tells it; and one on the model route.
	clientPolls := 0
	lines = node(t, "openai.mjs", 90*time.Second, append(env, "MODE=many", "CLIENTS=50", "JOBS=200")...)
	require.Len(t, lines, 200)
	seen := map[float64]bool{}
	for _, l := range lines {
		seen[l["i"].(float64)] = true
		require.Contains(t, []any{"completed", "failed"}, l["status"], "%v", l)
		if l["status"] == "failed" {
			require.Equal(t, "video_generation_failed", l["error"].(map[string]any)["code"], "%v", l)
		}
		ids = append(ids, l["id"].(string))
		clientPolls += int(l["polls"].(float64))
	}
	require.Len(t, seen, 200, "every video reached its client")

	// The SDK's list() auto-pagination walks every video the face made
	// on the route, seven a page.
	listed := map[string]bool{}
	for _, l := range node(t, "openai.mjs", 30*time.Second, append(env, "MODE=list", "LIMIT=7")...) {
		require.False(t, listed[l["id"].(string)], "listed once: %v", l)
		listed[l["id"].(string)] = true
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	require.Equal(t, want, listed, "the list is the face's videos on the route")
	lines = node(t, "openai.mjs", 30*time.Second, append(env, "MODE=many", "CLIENTS=1", "JOBS=1", "ROUTE=video", "MODEL=acme/video")...)
	require.Len(t, lines, 1)
	ids = append(ids, lines[0]["id"].(string))

	// The provider's ground truth: its status calls are Pollux's own (the
	// records' polls), however often the clients polled.
	var polls int
	e2etest.WaitFor(t, "every record's polls counted", 30*time.Second, func() bool {
		polls = 0
		for _, id := range ids {
			j := s.lookup(t, id)
			if j == nil || !j.State.Terminal() || j.PollsOpen {
				return false
			}
			polls += j.Polls
		}
		return true
	})
	st := s.SimStats(t)
	t.Logf("openai face: %d videos, provider status calls %d, records' polls %d, the 50 clients' polls %d", len(ids), st.StatusCalls, polls, clientPolls)
	require.Equal(t, polls, st.StatusCalls, "the provider saw Pollux's polls, not the clients'")
	// A provider create the kill interrupted is in doubt, and sent again
	// with its key (the provider dedupes keys): each video is still
	// created once.
	t.Logf("creates sent again with their key: %d", st.DuplicateCreates)
	require.Equal(t, len(ids), st.Predictions, "one prediction per video")
}

// keyedAcrossAKill makes keyed creates one after another while the
// gateway is SIGKILLed and restarted; the SDK's retries and the app's,
// with the same Idempotency-Key, make one video per key.
func keyedAcrossAKill(t *testing.T, s *stack, env []string) []string {
	t.Helper()
	const n, prefix = 12, "kill"
	idOf := func(i int) string {
		return "video_" + hex.EncodeToString(face.IDBytes(appCtx, face.OpenAI, "sim", fmt.Sprintf("%s-%d", prefix, i), 16))
	}
	out := make(chan []map[string]any, 1)
	go func() {
		var lines []map[string]any
		defer func() { out <- lines }() // also when node fails the test
		lines = node(t, "openai.mjs", 90*time.Second, append(env, "MODE=keyed", fmt.Sprintf("JOBS=%d", n), "KEY_PREFIX="+prefix)...)
	}()
	e2etest.WaitFor(t, "the third keyed video", 30*time.Second, func() bool { return s.lookup(t, idOf(2)) != nil })
	s.Ingest.Kill(t) // the app is creating the fourth
	s.StartIngest(t)
	lines := <-out
	require.Len(t, lines, n)
	var ids []string
	retried := 0
	for i, l := range lines {
		require.Equal(t, idOf(i), l["id"], "the key makes the id")
		if l["tries"].(float64) > 1 {
			retried++
		}
		ids = append(ids, l["id"].(string))
	}
	t.Logf("openai face: %d keyed creates across a gateway SIGKILL, %d retried by the app after the SDK's own retries", n, retried)
	return ids
}
