package faces_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
)

// The lumaai SDK (1.19.1), unchanged but for its base URL and key, against
// the Luma face of the real binaries (on the model route): generations
// .create, the get loop, delete and list work end to end, its errors are
// its own classes, a keyed create retried across a SIGKILL of the gateway
// is one job, and 50 polling clients cost the provider only Pollux's own
// status calls.
func TestLumaFace(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	t.Parallel()
	s := start(t)
	env := s.sdkEnv("ROUTE=video")
	var ids []string

	steps := byField("step", node(t, "luma.mjs", 60*time.Second, append(env, "MODE=main")...))
	created := steps["create"]["generation"].(map[string]any)
	require.True(t, face.IsUUID(created["id"].(string)), "%v", created)
	require.Equal(t, "queued", created["state"])
	require.Equal(t, "video", created["generation_type"])
	require.Equal(t, "ray-2", created["model"])
	done := steps["done"]["generation"].(map[string]any)
	require.Equal(t, "completed", done["state"], "%v", done)
	require.Regexp(t, `^https://`, done["assets"].(map[string]any)["video"])
	deleted := steps["deleted"]["generation"].(map[string]any)
	require.Equal(t, "failed", deleted["state"], "a deleted generation was canceled: %v", deleted)
	require.Equal(t, map[string]any{"class": "NotFoundError", "status": 404.0, "detail": "Generation not found", "loc": nil},
		map[string]any{"class": steps["not_found"]["error"].(map[string]any)["class"], "status": steps["not_found"]["error"].(map[string]any)["status"],
			"detail": steps["not_found"]["error"].(map[string]any)["detail"], "loc": steps["not_found"]["error"].(map[string]any)["loc"]})
	ids = append(ids, done["id"].(string), deleted["id"].(string)) // the create is done or failed
	for _, id := range steps["done"]["failed"].([]any) {
		ids = append(ids, id.(string))
	}

	errs := errorsOf(t, "luma.mjs", env)
	for name, want := range map[string][3]any{
		"wrong_token": {"AuthenticationError", 401.0, nil},
		"read_only":   {"PermissionDeniedError", 403.0, nil},
		"no_model":    {"UnprocessableEntityError", 422.0, []any{"body", "model"}},
		"unknown":     {"NotFoundError", 404.0, nil},
		"quota":       {"RateLimitError", 429.0, nil},
	} {
		e := errs[name]
		require.Equal(t, want[0], e["class"], "%s: %v", name, e)
		require.Equal(t, want[1], e["status"], name)
		require.Equal(t, want[2], e["loc"], name)
	}

	ids = append(ids, keyedAcrossKill(t, s, "luma.mjs", env, func(key string) string {
		return face.UUID(face.IDBytes(appCtx, face.Luma, "video", key, 16))
	})...)

	lines := node(t, "luma.mjs", 120*time.Second, append(env, "MODE=many", "CLIENTS=50", "JOBS=200")...)
	require.Len(t, lines, 200)
	seen, clientPolls := map[float64]bool{}, 0
	for _, l := range lines {
		seen[l["i"].(float64)] = true
		if l["state"] == "completed" {
			require.NotEmpty(t, l["video"], "%v", l)
		} else {
			require.Equal(t, "failed", l["state"], "%v", l)
			require.NotEmpty(t, l["failure_reason"], "%v", l)
		}
		ids = append(ids, l["id"].(string))
		clientPolls += int(l["polls"].(float64))
	}
	require.Len(t, seen, 200, "every generation reached its client")

	requireProviderPollsArePolluxs(t, s, "luma", ids, clientPolls)

	// The list, by offset, is every generation the face made on the route
	// (once every job has ended: a create the SIGKILL left in doubt is
	// pending meanwhile).
	listed := map[string]bool{}
	for _, l := range node(t, "luma.mjs", 30*time.Second, append(env, "MODE=list", "LIMIT=7")...) {
		require.False(t, listed[l["id"].(string)], "listed once: %v", l)
		listed[l["id"].(string)] = true
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for id := range want {
		if !listed[id] {
			j := s.lookup(t, id)
			t.Errorf("generation %s is not listed: %+v", id, j)
		}
	}
	require.Len(t, listed, len(want), "the list is the face's generations on the route")
}
