package faces_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
)

// The @google/genai SDK (3.1.0), unchanged but for its base URL and key,
// against the genai face of the real binaries: generateVideos, the
// getVideosOperation loop and files.download work end to end (and the
// Gemini API's shape), its errors are its own ApiError with Google's
// statuses, a keyed create retried across a SIGKILL of the gateway is one
// job, and 50 polling clients cost the provider only Pollux's own status
// calls.
func TestGenAIFace(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	t.Parallel()
	s := start(t)
	env := s.sdkEnv("MODEL=acme/video")
	var ids []string
	idOf := func(name string) string { return name[len(name)-26:] }

	steps := byField("step", node(t, "genai.mjs", 60*time.Second, append(env, "MODE=main", "MODEL=openai/sora-content", "GEMINI_ROUTE=video")...))
	created := steps["create"]["operation"].(map[string]any)
	require.Regexp(t, `^publishers/openai/models/sora-content/operations/[a-z2-7]{26}$`, created["name"])
	require.Nil(t, created["done"])
	done := steps["done"]["operation"].(map[string]any)
	require.Equal(t, true, done["done"], "%v", done)
	videos := done["response"].(map[string]any)["generatedVideos"].([]any)
	require.Len(t, videos, 1)
	require.Contains(t, videos[0].(map[string]any)["video"].(map[string]any)["uri"], "/genai/sim/v1beta1/files/"+idOf(created["name"].(string))+"0:download")
	require.Equal(t, map[string]any{"step": "download", "bytes": 4096.0, "fetched": 4096.0, "status": 200.0}, steps["download"])
	g := steps["gemini"]["operation"].(map[string]any)
	require.Regexp(t, `^models/veo-3.1-generate-preview/operations/[a-z2-7]{26}$`, g["name"])
	require.Equal(t, true, g["done"], "%v", g)
	require.Nil(t, g["error"], "a Gemini-shaped create runs on the model route's member")
	require.Len(t, g["response"].(map[string]any)["generatedVideos"], 1, "the Gemini API's samples, as the SDK reads them")
	ids = append(ids, idOf(created["name"].(string)), idOf(g["name"].(string)))
	for _, name := range steps["gemini"]["failed"].([]any) {
		ids = append(ids, idOf(name.(string)))
	}

	errs := errorsOf(t, "genai.mjs", env)
	for name, want := range map[string][4]any{
		"wrong_token": {401.0, "UNAUTHENTICATED", nil},
		"read_only":   {403.0, "PERMISSION_DENIED", nil},
		"no_prompt":   {400.0, "INVALID_ARGUMENT", "instances"},
		"unknown":     {404.0, "NOT_FOUND", nil},
		"quota":       {429.0, "RESOURCE_EXHAUSTED", nil},
	} {
		e := errs[name]
		require.Equal(t, "ApiError", e["class"], "%s: %v", name, e)
		require.Equal(t, want[0], e["status"], name)
		require.Equal(t, want[0], e["code"], name)
		require.Equal(t, want[1], e["rpc"], name)
		require.Equal(t, want[2], e["field"], name)
	}

	ids = append(ids, keyedAcrossKill(t, s, "genai.mjs", env, func(key string) string {
		return face.Base32.EncodeToString(face.IDBytes(appCtx, face.GenAI, "sim", key, 16))
	})...)

	lines := node(t, "genai.mjs", 120*time.Second, append(env, "MODE=many", "CLIENTS=50", "JOBS=200")...)
	require.Len(t, lines, 200)
	seen, clientPolls := map[float64]bool{}, 0
	for _, l := range lines {
		seen[l["i"].(float64)] = true
		if l["error"] == nil {
			require.Equal(t, 1.0, l["videos"], "%v", l)
		} else {
			require.Equal(t, 13.0, l["error"].(map[string]any)["code"], "a failed generation: %v", l)
		}
		ids = append(ids, l["id"].(string))
		clientPolls += int(l["polls"].(float64))
	}
	require.Len(t, seen, 200, "every video reached its client")
	requireProviderPollsArePolluxs(t, s, "genai", ids, clientPolls)
}
