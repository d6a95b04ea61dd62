package generic_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/generic"
	"github.com/pollux-dev/pollux/pkg/provider/providertest"
	"github.com/pollux-dev/pollux/pkg/signature"
	"github.com/pollux-dev/pollux/pkg/state"
)

// stateCase is one documented status value and what it must map to.
type stateCase struct {
	file  string
	state state.State
	raw   string
	check func(*testing.T, provider.Status)
}

func TestLumaExample(t *testing.T) {
	t.Parallel()
	const id = "d1968551-6113-4b46-b567-09210c2e79b0"
	f := providertest.NewServer(t, map[string]providertest.Reply{"POST /dream-machine/v1/generations/video": {Status: 201, Body: fixture(t, "luma/queued.json")}})
	a := exampleAdapter(t, "luma", f, "luma-test-key")
	require.Equal(t, provider.Info{Kind: "generic", Callbacks: true}, a.Info(), "no cancel, unsigned callbacks, no floor")
	id2, err := a.CallbackRemoteID(fixture(t, "luma/completed.json"))
	require.NoError(t, err)
	require.Equal(t, id, id2, "a callback carries the Generation")

	st, err := a.Submit(context.Background(), provider.SubmitRequest{Model: "ray-2", Input: json.RawMessage(`{"prompt":"a red kite over the sea","aspect_ratio":"16:9"}`)})
	require.NoError(t, err)
	require.Equal(t, id, st.RemoteID)
	require.Equal(t, state.Queued, st.State)
	req := f.Last()
	require.Equal(t, "Bearer luma-test-key", req.Header.Get("Authorization"))
	require.JSONEq(t, `{"model":"ray-2","prompt":"a red kite over the sea","aspect_ratio":"16:9"}`, string(req.Body))

	created := time.Date(2026, 11, 29, 10, 0, 0, 123000000, time.UTC)
	runStates(t, f, a, "GET /dream-machine/v1/generations/"+id, provider.Ref{ID: id, Model: "ray-2"}, []stateCase{
		{"luma/queued.json", state.Queued, "queued", func(t *testing.T, st provider.Status) { require.Equal(t, created, st.CreatedAt) }},
		{"luma/dreaming.json", state.Running, "dreaming", nil},
		{"luma/completed.json", state.Succeeded, "completed", func(t *testing.T, st provider.Status) {
			require.Equal(t, []string{"https://storage.cdn-luma.com/dream_machine/" + id + "/video_0_kite.mp4"}, st.Outputs)
			require.True(t, st.OutputsExpireAt.IsZero(), "Luma documents no retention")
		}},
		{"luma/failed.json", state.Failed, "failed", func(t *testing.T, st provider.Status) {
			require.Equal(t, "Prompt not allowed because it failed moderation", st.Reason)
		}},
	})

	f.Set("GET /dream-machine/v1/generations/"+id, providertest.Reply{Status: 404, Body: fixture(t, "luma/not_found.json")})
	_, err = a.Status(context.Background(), provider.Ref{ID: id})
	require.Equal(t, provider.NotFound, provider.ClassOf(err), "a deleted generation reconciles")
	_, err = a.Cancel(context.Background(), provider.Ref{ID: id})
	require.ErrorIs(t, err, provider.ErrUnsupported)
}

func TestKlingExample(t *testing.T) {
	t.Parallel()
	const id = "CjhMkGdnKsgAAAAAAMs0Xw"
	f := providertest.NewServer(t, map[string]providertest.Reply{"POST /v1/videos/image2video": ok(t, "kling/submitted.json")})
	a := exampleAdapter(t, "kling", f, "ak-test:sk-test")
	now := time.Now()
	a.SetNow(func() time.Time { return now })

	st, err := a.Submit(context.Background(), provider.SubmitRequest{Model: "image2video:kling-v2-1-master", Input: json.RawMessage(`{"prompt":"a kite","image":"https://example.com/k.png"}`)})
	require.NoError(t, err)
	require.Equal(t, id, st.RemoteID)
	req := f.Last()
	require.JSONEq(t, `{"model_name":"kling-v2-1-master","prompt":"a kite","image":"https://example.com/k.png"}`, string(req.Body))
	checkKlingJWT(t, req.Header.Get("Authorization"), now)

	ttl := 30 * 24 * time.Hour
	created := time.UnixMilli(1796032800000).UTC()
	runStates(t, f, a, "GET /v1/videos/text2video/"+id, provider.Ref{ID: id, Model: "kling-v2-1-master"}, []stateCase{
		{"kling/submitted.json", state.Queued, "submitted", func(t *testing.T, st provider.Status) { require.Equal(t, created, st.CreatedAt) }},
		{"kling/processing.json", state.Running, "processing", func(t *testing.T, st provider.Status) { require.True(t, st.CompletedAt.IsZero()) }},
		{"kling/succeed.json", state.Succeeded, "succeed", func(t *testing.T, st provider.Status) {
			done := time.UnixMilli(1796032900000).UTC()
			require.Equal(t, done, st.CompletedAt)
			require.Equal(t, []string{"https://cdn.klingai.com/bs2/upload-kling-api/7364/kite.mp4"}, st.Outputs)
			require.Equal(t, done.Add(ttl), st.OutputsExpireAt, "media are cleared after 30 days")
		}},
		{"kling/failed.json", state.Failed, "failed", func(t *testing.T, st provider.Status) {
			require.Equal(t, "Failure to pass the risk control system", st.Reason)
		}},
	})
	require.Equal(t, "/v1/videos/text2video/"+id, f.Last().Path, "a bare model uses the default endpoint")

	f.Set("GET /v1/videos/text2video/"+id, providertest.Reply{Status: 429, Body: fixture(t, "kling/throttled.json")})
	_, err = a.Status(context.Background(), provider.Ref{ID: id, Model: "kling-v2-1-master"})
	require.Equal(t, provider.RateLimited, provider.ClassOf(err))
	require.Contains(t, err.Error(), "Parallel task over resource pack limit")
	f.Set("GET /v1/videos/text2video/"+id, providertest.Reply{Status: 401, Body: fixture(t, "kling/unauthorized.json")})
	_, err = a.Status(context.Background(), provider.Ref{ID: id, Model: "kling-v2-1-master"})
	require.Equal(t, provider.Auth, provider.ClassOf(err))
	f.Set("GET /v1/videos/text2video/"+id, providertest.Reply{Status: 200, Body: fixture(t, "kling/unauthorized.json")})
	_, err = a.Status(context.Background(), provider.Ref{ID: id, Model: "kling-v2-1-master"})
	require.Error(t, err, "a 200 whose code is not 0 is an error, not a status")
	require.NotContains(t, err.Error(), "sk-test")
}

// checkKlingJWT verifies the HS256 token Kling expects: iss = access key,
// exp 30 min ahead, nbf 5 s back, signed with the secret key.
func checkKlingJWT(t *testing.T, auth string, now time.Time) {
	t.Helper()
	tok, found := strings.CutPrefix(auth, "Bearer ")
	require.True(t, found, auth)
	parts := strings.Split(tok, ".")
	require.Len(t, parts, 3)
	mac := hmac.New(sha256.New, []byte("sk-test"))
	_, _ = mac.Write([]byte(parts[0] + "." + parts[1]))
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	require.NoError(t, err)
	require.True(t, hmac.Equal(mac.Sum(nil), sig), "signed with the secret key")
	var header, claims map[string]any
	for i, dst := range []*map[string]any{&header, &claims} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, dst))
	}
	require.Equal(t, map[string]any{"alg": "HS256", "typ": "JWT"}, header)
	require.Equal(t, "ak-test", claims["iss"])
	require.InDelta(t, float64(now.Add(30*time.Minute).Unix()), claims["exp"], 1)
	require.InDelta(t, float64(now.Add(-5*time.Second).Unix()), claims["nbf"], 1)
}

func TestMiniMaxExample(t *testing.T) {
	t.Parallel()
	const id, fileID = "106916112212032", "205258526306433"
	f := providertest.NewServer(t, map[string]providertest.Reply{
		"POST /v1/video_generation": ok(t, "minimax/submit.json"),
		"GET /v1/files/retrieve":    ok(t, "minimax/retrieve.json"),
	})
	a := exampleAdapter(t, "minimax", f, "mm-test-key")
	require.False(t, a.Info().Cancel)

	st, err := a.Submit(context.Background(), provider.SubmitRequest{Model: "MiniMax-Hailuo-02", Input: json.RawMessage(`{"prompt":"a kite","duration":6}`)})
	require.NoError(t, err)
	require.Equal(t, id, st.RemoteID)
	require.JSONEq(t, `{"model":"MiniMax-Hailuo-02","prompt":"a kite","duration":6}`, string(f.Last().Body))

	ref := provider.Ref{ID: id, Model: "MiniMax-Hailuo-02"}
	runStates(t, f, a, "GET /v1/query/video_generation", ref, []stateCase{
		{"minimax/preparing.json", state.Queued, "Preparing", nil},
		{"minimax/queueing.json", state.Queued, "Queueing", nil},
		{"minimax/processing.json", state.Running, "Processing", nil},
		{"minimax/fail.json", state.Failed, "Fail", func(t *testing.T, st provider.Status) {
			require.Equal(t, `the provider reported "Fail"`, st.Reason)
		}},
		{"minimax/success.json", state.Succeeded, "Success", func(t *testing.T, st provider.Status) {
			require.Equal(t, []string{"https://public-cdn-video-data-algeng.oss-cn-wulanchabu.aliyuncs.com/inference_output/video/2026-11-29/kite.mp4"}, st.Outputs)
			require.True(t, st.OutputsExpireAt.IsZero(), "the download URL's lifetime is not documented")
			retrieve := f.Last()
			require.Equal(t, "/v1/files/retrieve", retrieve.Path)
			require.Equal(t, "file_id="+fileID, retrieve.RawQuery, "the follow-up takes the file_id of the status answer")
		}},
	})
	for _, r := range f.Requests() {
		if r.Path == "/v1/query/video_generation" {
			require.Equal(t, "task_id="+id, r.RawQuery)
		}
	}

	// Errors inside HTTP 200 answers.
	tests := []struct {
		file  string
		class provider.Class
		msg   string
	}{
		{"minimax/rate_limit.json", provider.RateLimited, "rate limit (code 1002)"},
		{"minimax/not_authorized.json", provider.Auth, "not authorized (code 1004)"},
		{"minimax/insufficient_balance.json", provider.Auth, "insufficient balance (code 1008)"},
		{"minimax/sensitive_input.json", provider.Invalid, "input new_sensitive (code 1026)"},
	}
	for _, tt := range tests {
		f.Set("POST /v1/video_generation", ok(t, tt.file))
		_, err := a.Submit(context.Background(), provider.SubmitRequest{Model: "MiniMax-Hailuo-02"})
		require.Equal(t, tt.class, provider.ClassOf(err), tt.file)
		require.Equal(t, tt.msg, provider.MessageOf(err))
	}
	f.Set("GET /v1/query/video_generation", ok(t, "minimax/sensitive_output.json"))
	st, err = a.Status(context.Background(), ref)
	require.NoError(t, err)
	require.Equal(t, state.Failed, st.State, "1027 at status is a failed job")
	require.Equal(t, "output new_sensitive (code 1027)", st.Reason)

	// A follow-up failure is not a success without outputs.
	f.Set("GET /v1/query/video_generation", ok(t, "minimax/success.json"))
	f.Set("GET /v1/files/retrieve", providertest.Reply{Status: 502})
	_, err = a.Status(context.Background(), ref)
	require.Equal(t, provider.Transient, provider.ClassOf(err))
	f.Set("GET /v1/query/video_generation", providertest.Reply{Status: 200, Body: []byte(`{"task_id":"1","status":"Success","base_resp":{"status_code":0}}`)})
	_, err = a.Status(context.Background(), ref)
	require.ErrorContains(t, err, "no file_id")
}

func TestSeedanceExample(t *testing.T) {
	t.Parallel()
	const id = "cgt-20261129100000-68d9t"
	taskPath := "/api/v3/contents/generations/tasks/" + id
	f := providertest.NewServer(t, map[string]providertest.Reply{"POST /api/v3/contents/generations/tasks": ok(t, "seedance/create.json")})
	a := exampleAdapter(t, "seedance", f, "ark-test-key")
	require.True(t, a.Info().Cancel)

	st, err := a.Submit(context.Background(), provider.SubmitRequest{Model: "seedance-1-0-pro-250528",
		Input: json.RawMessage(`{"content":[{"type":"text","text":"a kite --duration 5"}]}`)})
	require.NoError(t, err)
	require.Equal(t, id, st.RemoteID)
	require.JSONEq(t, `{"model":"seedance-1-0-pro-250528","content":[{"type":"text","text":"a kite --duration 5"}]}`, string(f.Last().Body))

	ref := provider.Ref{ID: id, Model: "seedance-1-0-pro-250528"}
	runStates(t, f, a, "GET "+taskPath, ref, []stateCase{
		{"seedance/queued.json", state.Queued, "queued", func(t *testing.T, st provider.Status) {
			require.Equal(t, time.Unix(1796032800, 0).UTC(), st.CreatedAt)
		}},
		{"seedance/running.json", state.Running, "running", nil},
		{"seedance/succeeded.json", state.Succeeded, "succeeded", func(t *testing.T, st provider.Status) {
			require.Len(t, st.Outputs, 1)
			require.True(t, strings.HasPrefix(st.Outputs[0], "https://ark-content-generation-ap-southeast-1.tos-ap-southeast-1.volces.com/"))
			require.Equal(t, time.Unix(1796032900, 0).UTC().Add(24*time.Hour), st.OutputsExpireAt)
		}},
		{"seedance/failed.json", state.Failed, "failed", func(t *testing.T, st provider.Status) {
			require.Equal(t, "OutputVideoSensitiveContentDetected: The request failed because the output video may contain sensitive information.", st.Reason)
		}},
		{"seedance/cancelled.json", state.Canceled, "cancelled", nil},
	})

	// Cancel deletes a queued task, and never a finished one.
	f.Set("GET "+taskPath, ok(t, "seedance/queued.json"))
	f.Set("DELETE "+taskPath, providertest.Reply{Status: 200, Body: []byte(`{}`)})
	st, err = a.Cancel(context.Background(), ref)
	require.NoError(t, err)
	require.Equal(t, state.Canceled, st.State)
	require.Equal(t, http.MethodDelete, f.Last().Method)
	f.Set("GET "+taskPath, ok(t, "seedance/succeeded.json"))
	st, err = a.Cancel(context.Background(), ref)
	require.NoError(t, err)
	require.Equal(t, state.Succeeded, st.State)
	require.Equal(t, http.MethodGet, f.Last().Method, "no DELETE of a finished task")

	f.Set("POST /api/v3/contents/generations/tasks", providertest.Reply{Status: 400, Body: fixture(t, "seedance/invalid.json")})
	_, err = a.Submit(context.Background(), provider.SubmitRequest{Model: "seedance-1-0-pro-250528"})
	require.Equal(t, provider.Invalid, provider.ClassOf(err))
	require.Contains(t, err.Error(), "`content` specified in the request is not valid")
}

func TestWanExample(t *testing.T) {
	t.Parallel()
	const id = "0385dc79-5ff8-4d82-bcb6-2f8c4b1a9e07"
	f := providertest.NewServer(t, map[string]providertest.Reply{"POST /api/v1/services/aigc/video-generation/video-synthesis": ok(t, "wan/create.json")})
	a := exampleAdapter(t, "wan", f, "sk-dashscope-test")
	now := time.Date(2026, 11, 29, 10, 5, 0, 0, time.UTC)
	a.SetNow(func() time.Time { return now })
	require.Equal(t, provider.Info{Kind: "generic", PollFloor: 15 * time.Second}, a.Info())

	st, err := a.Submit(context.Background(), provider.SubmitRequest{Model: "wan2.2-t2v-plus",
		Input: json.RawMessage(`{"input":{"prompt":"a kite"},"parameters":{"size":"1280*720"}}`)})
	require.NoError(t, err)
	require.Equal(t, id, st.RemoteID)
	req := f.Last()
	require.Equal(t, "enable", req.Header.Get("X-DashScope-Async"))
	require.Equal(t, "Bearer sk-dashscope-test", req.Header.Get("Authorization"))
	require.JSONEq(t, `{"model":"wan2.2-t2v-plus","input":{"prompt":"a kite"},"parameters":{"size":"1280*720"}}`, string(req.Body))

	ref := provider.Ref{ID: id, Model: "wan2.2-t2v-plus"}
	runStates(t, f, a, "GET /api/v1/tasks/"+id, ref, []stateCase{
		{"wan/pending.json", state.Queued, "PENDING", nil},
		{"wan/running.json", state.Running, "RUNNING", nil},
		{"wan/succeeded.json", state.Succeeded, "SUCCEEDED", func(t *testing.T, st provider.Status) {
			require.Equal(t, []string{"https://dashscope-result-sh.oss-cn-shanghai.aliyuncs.com/1d/kite.mp4?Expires=1796119487&Signature=abc"}, st.Outputs)
			require.Equal(t, now.Add(24*time.Hour), st.OutputsExpireAt, "no zone-aware time: from when Pollux saw it")
		}},
		{"wan/failed.json", state.Failed, "FAILED", func(t *testing.T, st provider.Status) {
			require.Equal(t, "DataInspectionFailed: Output data may contain inappropriate content.", st.Reason)
		}},
		{"wan/canceled.json", state.Canceled, "CANCELED", nil},
	})
	require.Empty(t, f.Last().Header.Get("X-DashScope-Async"), "the async header is for submit only")

	f.Set("GET /api/v1/tasks/"+id, ok(t, "wan/unknown.json"))
	_, err = a.Status(context.Background(), ref)
	require.Equal(t, provider.NotFound, provider.ClassOf(err), "UNKNOWN: no such task, or expired: reconcile")

	for status, tt := range map[int]struct {
		file  string
		class provider.Class
	}{
		429: {"wan/throttled.json", provider.RateLimited},
		401: {"wan/invalid_api_key.json", provider.Auth},
		400: {"wan/invalid_parameter.json", provider.Invalid},
	} {
		f.Set("POST /api/v1/services/aigc/video-generation/video-synthesis", providertest.Reply{Status: status, Body: fixture(t, tt.file)})
		_, err := a.Submit(context.Background(), provider.SubmitRequest{Model: "wan2.2-t2v-plus"})
		require.Equal(t, tt.class, provider.ClassOf(err), tt.file)
		require.NotEmpty(t, provider.MessageOf(err))
	}
}

func TestOpenAIVideoExample(t *testing.T) {
	t.Parallel()
	const id = "video_68d7512d07848190b3e45da0ecbebcde0b7a9a7e4d2a35f6"
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // Standard Webhooks vector A's
	videoPath := "/v1/videos/" + id
	f := providertest.NewServer(t, map[string]providertest.Reply{"POST /v1/videos": ok(t, "openai/queued.json")})
	a, err := generic.NewAdapter(provider.Config{Route: "openai", Kind: generic.Kind, BaseURL: f.URL + "/v1",
		Token: "sk-test", WebhookSecret: secret, Options: loadExample(t, "openai")})
	require.NoError(t, err)
	created, done, expires := time.Unix(1795946400, 0).UTC(), time.Unix(1795946500, 0).UTC(), time.Unix(1796032900, 0).UTC()
	now := done.Add(time.Minute)
	a.SetNow(func() time.Time { return now })
	require.Equal(t, provider.Info{Kind: "generic", Webhooks: true, WebhooksByRemoteID: true}, a.Info(), "no cancel, no idempotency key, signed webhooks at the project's one endpoint")

	// Create, once: the input with the model, no webhook field (the
	// example's endpoint is configured at the provider).
	st, err := a.Submit(context.Background(), provider.SubmitRequest{Model: "sora-2",
		Input: json.RawMessage(`{"prompt":"a red kite over the sea","seconds":"8"}`), WebhookURL: "https://hooks.example/webhooks/openai?job=j"})
	require.NoError(t, err)
	require.Equal(t, id, st.RemoteID)
	require.Equal(t, state.Queued, st.State)
	require.Equal(t, "Bearer sk-test", f.Last().Header.Get("Authorization"))
	require.Empty(t, f.Last().Header.Get("Idempotency-Key"))
	require.JSONEq(t, `{"model":"sora-2","prompt":"a red kite over the sea","seconds":"8"}`, string(f.Last().Body))

	ref := provider.Ref{ID: id, Model: "sora-2"}
	runStates(t, f, a, "GET "+videoPath, ref, []stateCase{
		{"openai/queued.json", state.Queued, "queued", func(t *testing.T, st provider.Status) { require.Equal(t, created, st.CreatedAt) }},
		{"openai/in_progress.json", state.Running, "in_progress", func(t *testing.T, st provider.Status) {
			require.NotNil(t, st.Progress)
			require.InDelta(t, 0.42, *st.Progress, 1e-9)
		}},
		{"openai/completed.json", state.Succeeded, "completed", func(t *testing.T, st provider.Status) {
			require.Equal(t, []string{f.URL + videoPath + "/content"}, st.Outputs, "the content endpoint")
			require.Equal(t, done, st.CompletedAt)
			require.Equal(t, expires, st.OutputsExpireAt, "expires_at")
		}},
		{"openai/failed.json", state.Failed, "failed", func(t *testing.T, st provider.Status) {
			require.Equal(t, "moderation_blocked: Your request was blocked by our moderation system.", st.Reason)
		}},
	})

	// openai-poll-after-ms on a status answer is the next poll's floor.
	f.Set("GET "+videoPath, providertest.Reply{Status: 200, Header: http.Header{"Openai-Poll-After-Ms": {"2500"}}, Body: fixture(t, "openai/in_progress.json")})
	st, err = a.Status(context.Background(), ref)
	require.NoError(t, err)
	require.Equal(t, 2500*time.Millisecond, st.PollAfter)

	// Read after expires_at, a completed video's assets are gone.
	f.Set("GET "+videoPath, ok(t, "openai/completed.json"))
	now = expires
	st, err = a.Status(context.Background(), ref)
	require.NoError(t, err)
	require.Equal(t, state.Expired, st.State)
	require.Empty(t, st.Outputs)

	f.Set("GET "+videoPath, providertest.Reply{Status: 404, Body: fixture(t, "openai/not_found.json")})
	_, err = a.Status(context.Background(), ref)
	require.Equal(t, provider.NotFound, provider.ClassOf(err))
	f.Set("GET "+videoPath, providertest.Reply{Status: 429, Header: http.Header{"Retry-After-Ms": {"1500"}}, Body: fixture(t, "openai/rate_limited.json")})
	_, err = a.Status(context.Background(), ref)
	require.Equal(t, provider.RateLimited, provider.ClassOf(err))
	require.Equal(t, 1500*time.Millisecond, provider.RetryAfterOf(err))
	_, err = a.Cancel(context.Background(), ref)
	require.ErrorIs(t, err, provider.ErrUnsupported, "no cancel")

	// video.completed and video.failed name only the video: verified, each
	// is a hint, never a state.
	key, err := signature.ParseSecret(secret)
	require.NoError(t, err)
	now = time.Unix(1795946500, 0)
	for _, file := range []string{"openai/webhook_completed.json", "openai/webhook_failed.json"} {
		body := fixture(t, file)
		h := http.Header{}
		h.Set("webhook-id", "wh_"+strings.TrimSuffix(strings.TrimPrefix(file, "openai/"), ".json"))
		h.Set("webhook-timestamp", "1795946500")
		h.Set("webhook-signature", signature.Sign(key, h.Get("webhook-id"), now, body))
		delivery, err := a.VerifyWebhook(context.Background(), h, body)
		require.NoError(t, err, file)
		require.Equal(t, h.Get("webhook-id"), delivery)
		st, err := a.ParseWebhook(h, body)
		require.NoError(t, err, file)
		require.Equal(t, provider.Status{RemoteID: id, Observation: state.Observation{State: state.Unknown}}, st, file)

		forged := h.Clone()
		forged.Set("webhook-signature", signature.Sign([]byte("another secret of 24 bytes"), h.Get("webhook-id"), now, body))
		_, err = a.VerifyWebhook(context.Background(), forged, body)
		require.ErrorIs(t, err, provider.ErrSignature, file)
		forged.Del("webhook-signature")
		_, err = a.VerifyWebhook(context.Background(), forged, body)
		require.ErrorIs(t, err, provider.ErrMalformed, file)
	}

	// Signed callbacks need the secret; unsigned ones refuse one.
	_, err = generic.NewAdapter(provider.Config{Route: "openai", Kind: generic.Kind, Token: "t", Options: loadExample(t, "openai")})
	require.ErrorContains(t, err, "webhook secret")
	_, err = generic.NewAdapter(provider.Config{Route: "luma", Kind: generic.Kind, Token: "t", WebhookSecret: secret, Options: loadExample(t, "luma")})
	require.ErrorContains(t, err, "webhook secret")
}

// runStates serves each case's sample at key and checks the status read.
func runStates(t *testing.T, f *providertest.Server, a interface {
	Status(context.Context, provider.Ref) (provider.Status, error)
}, key string, ref provider.Ref, cases []stateCase) {
	t.Helper()
	for _, c := range cases {
		f.Set(key, ok(t, c.file))
		st, err := a.Status(context.Background(), ref)
		require.NoError(t, err, c.file)
		require.Equal(t, c.state, st.State, c.file)
		require.Equal(t, c.raw, st.Raw, c.file)
		require.Equal(t, ref.ID, st.RemoteID, c.file)
		if c.check != nil {
			c.check(t, st)
		}
	}
}
