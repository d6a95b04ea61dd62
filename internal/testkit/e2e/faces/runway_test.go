package faces_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
)

// The @runwayml/sdk SDK (4.20.1), unchanged but for its base URL and key,
// against the Runway face of the real binaries (on the model route, whose
// members run Runway-shaped creates): imageToVideo.create(…)
// .waitForTaskOutput() and tasks.delete work end to end, its errors are
// its own classes, a keyed create retried across a SIGKILL of the gateway
// is one job, and 50 clients waiting with waitForTaskOutput for 200 tasks
// cost the provider only Pollux's own status calls.
func TestRunwayFace(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	t.Parallel()
	s := start(t)
	env := s.sdkEnv("ROUTE=video")
	var ids []string

	steps := byField("step", node(t, "runway.mjs", 90*time.Second, append(env, "MODE=main")...))
	done := steps["done"]["task"].(map[string]any)
	require.True(t, face.IsUUID(done["id"].(string)), "%v", done)
	require.Contains(t, []any{"SUCCEEDED"}, done["status"], "%v", done)
	require.Len(t, done["output"], 1)
	require.Regexp(t, `^https://`, done["output"].([]any)[0], "the provider's output URL (the route keeps no outputs)")
	require.Equal(t, map[string]any{"class": "TaskFailedError", "status": "CANCELLED"}, steps["deleted"]["error"], "a deleted task was canceled")
	nf := steps["not_found"]["error"].(map[string]any)
	require.Equal(t, "NotFoundError", nf["class"])
	ids = append(ids, done["id"].(string), steps["deleted"]["id"].(string))
	for _, id := range steps["done"]["failed"].([]any) {
		ids = append(ids, id.(string))
	}

	errs := errorsOf(t, "runway.mjs", env)
	for name, want := range map[string][3]any{
		"wrong_token": {"AuthenticationError", 401.0, nil},
		"read_only":   {"PermissionDeniedError", 403.0, nil},
		"no_model":    {"BadRequestError", 400.0, []any{"model"}},
		"old_version": {"BadRequestError", 400.0, []any{"X-Runway-Version"}},
		"unknown":     {"NotFoundError", 404.0, nil},
		"quota":       {"RateLimitError", 429.0, nil},
	} {
		e := errs[name]
		require.Equal(t, want[0], e["class"], "%s: %v", name, e)
		require.Equal(t, want[1], e["status"], name)
		require.Equal(t, want[2], e["path"], name)
		require.NotEmpty(t, e["error"], name)
	}

	ids = append(ids, keyedAcrossKill(t, s, "runway.mjs", env, func(key string) string {
		return face.UUID(face.IDBytes(appCtx, face.Runway, "video", key, 16))
	})...)

	// 200 tasks, 4 rounds of 50: waitForTaskOutput polls at once, then
	// sleeps 6 ± 1.5 s between polls, and the simulated provider's tasks
	// (under half a second at its time scale) have ended, and Pollux has
	// seen them end, by the second poll: each round costs one sleep.
	const jobs = 200
	began := time.Now()
	lines := node(t, "runway.mjs", 180*time.Second, append(env, "MODE=many", "CLIENTS=50", fmt.Sprintf("JOBS=%d", jobs))...)
	t.Logf("runway face: %d tasks by 50 clients waiting with waitForTaskOutput in %s", jobs, time.Since(began).Round(100*time.Millisecond))
	require.Len(t, lines, jobs+1)
	clientPolls := int(lines[jobs]["polls"].(float64))
	seen := map[float64]bool{}
	for _, l := range lines[:jobs] {
		seen[l["i"].(float64)] = true
		if l["status"] == "SUCCEEDED" {
			require.Equal(t, 1.0, l["outputs"], "%v", l)
		} else {
			require.Equal(t, map[string]any{"status": "FAILED", "failureCode": "INTERNAL"}, map[string]any{"status": l["status"], "failureCode": l["failureCode"]}, "%v", l)
		}
		ids = append(ids, l["id"].(string))
	}
	require.Len(t, seen, jobs, "every task reached its client")
	requireProviderPollsArePolluxs(t, s, "runway", ids, clientPolls)
}
