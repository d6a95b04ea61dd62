package atlas_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/atlas"
	"github.com/pollux-dev/pollux/pkg/provider/providertest"
	"github.com/pollux-dev/pollux/pkg/state"
)

const (
	testToken = "atlas-test-key"
	predID    = "7a3f0c2e9b8d4f61a2c5e0d1b4f6a8c9"
	model     = "kwaivgi/kling-v3.0-std/text-to-video"
	predPath  = "/api/v1/model/prediction/" + predID
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return b
}

func ok(t testing.TB, name string) providertest.Reply {
	return providertest.Reply{Status: 200, Body: fixture(t, name)}
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newAdapter builds an adapter pointed at the fake, with its clock at
// start and its log lines in the returned buffer.
func newAdapter(t *testing.T, f *providertest.Server, options string, start time.Time) (*atlas.Adapter, *clock, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	cfg := provider.Config{Route: "atlas", Kind: atlas.Kind, BaseURL: f.URL + "/api/v1", Token: testToken,
		HTTPClient: f.Client(), Logger: zerolog.New(logs)}
	if options != "" {
		cfg.Options = json.RawMessage(options)
	}
	a, err := atlas.NewAdapter(cfg)
	require.NoError(t, err)
	c := &clock{t: start}
	a.SetNow(c.Now)
	return a, c, logs
}

var (
	created   = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	completed = time.Date(2026, 11, 29, 10, 1, 40, 0, time.UTC)
	soon      = completed.Add(time.Minute)
	outputURL = "https://atlas-media.oss-us-west-1.aliyuncs.com/videos/" + predID + "/kite.mp4"
)

func TestSubmit(t *testing.T) {
	t.Parallel()
	f := providertest.NewTLSServer(t, map[string]providertest.Reply{"POST /api/v1/model/generateVideo": ok(t, "submit.json")})
	a, _, _ := newAdapter(t, f, `{"object_expiration_hours":48,"request_retention_hours":72}`, created)

	st, err := a.Submit(context.Background(), provider.SubmitRequest{JobID: "j1", Model: model,
		Input: json.RawMessage(`{"prompt":"a red kite over the sea","duration":5}`), WebhookURL: "https://hooks.example/atlas?job=j1"})
	require.NoError(t, err)
	require.Equal(t, predID, st.RemoteID)
	require.Equal(t, state.Queued, st.State)
	require.Equal(t, created, st.CreatedAt)
	require.JSONEq(t, `{"at":1795946400,"oh":48,"rh":72}`, string(st.RefData))
	req := f.Last()
	require.Equal(t, "Bearer "+testToken, req.Header.Get("Authorization"))
	require.Equal(t, "48", req.Header.Get("X-AtlasCloud-Object-Expiration-Hours"))
	require.Equal(t, "72", req.Header.Get("X-AtlasCloud-Request-Retention-Hours"))
	require.JSONEq(t, `{"model":"`+model+`","prompt":"a red kite over the sea","duration":5,"webhook_url":"https://hooks.example/atlas?job=j1"}`, string(req.Body))

	// The shapes of older doc pages: data.predictionId, a top-level id.
	for _, file := range []string{"submit_prediction_id.json", "submit_top_level.json"} {
		f.Set("POST /api/v1/model/generateVideo", ok(t, file))
		st, err := a.Submit(context.Background(), provider.SubmitRequest{Model: model})
		require.NoError(t, err, file)
		require.Equal(t, predID, st.RemoteID, file)
	}

	// No retention options: no headers.
	b, _, _ := newAdapter(t, f, "", created)
	_, err = b.Submit(context.Background(), provider.SubmitRequest{Model: model})
	require.NoError(t, err)
	require.Empty(t, f.Last().Header.Values("X-AtlasCloud-Object-Expiration-Hours"))
	require.Empty(t, f.Last().Header.Values("X-AtlasCloud-Request-Retention-Hours"))
	require.JSONEq(t, `{"model":"`+model+`"}`, string(f.Last().Body), "no webhook asked, none sent")

	// Refused before any call: another model in the input, a non-object
	// input, a malformed model.
	n := len(f.Requests())
	for _, req := range []provider.SubmitRequest{
		{Model: model, Input: json.RawMessage(`{"model":"other/model"}`)},
		{Model: model, Input: json.RawMessage(`[1]`)},
		{Model: "movie:" + model},
		{Model: "../etc"},
	} {
		_, err := a.Submit(context.Background(), req)
		require.Equal(t, provider.Invalid, provider.ClassOf(err), "%+v", req)
	}
	require.Len(t, f.Requests(), n)
}

func TestSubmitImageAndAudio(t *testing.T) {
	t.Parallel()
	f := providertest.NewTLSServer(t, map[string]providertest.Reply{
		"POST /api/v1/model/generateImage": ok(t, "submit.json"),
		"POST /api/v1/model/generateAudio": ok(t, "submit.json"),
	})
	a, _, _ := newAdapter(t, f, "", created)
	_, err := a.Submit(context.Background(), provider.SubmitRequest{Model: "image:black-forest-labs/flux-dev"})
	require.NoError(t, err)
	require.Equal(t, "/api/v1/model/generateImage", f.Last().Path)
	require.JSONEq(t, `{"model":"black-forest-labs/flux-dev"}`, string(f.Last().Body), "the prefix is Pollux's, not Atlas Cloud's")

	b, _, _ := newAdapter(t, f, `{"media":"audio"}`, created)
	_, err = b.Submit(context.Background(), provider.SubmitRequest{Model: "minimax/speech-02-hd"})
	require.NoError(t, err)
	require.Equal(t, "/api/v1/model/generateAudio", f.Last().Path)
}

// An unknown status is logged, for the operator to map.
func TestUnknownStatusIsLogged(t *testing.T) {
	t.Parallel()
	f := providertest.NewTLSServer(t, map[string]providertest.Reply{"GET " + predPath: ok(t, "status_unknown.json")})
	a, _, logs := newAdapter(t, f, "", soon)
	st, err := a.Status(context.Background(), provider.Ref{ID: predID, Model: model})
	require.NoError(t, err)
	require.Equal(t, state.Unknown, st.State)
	require.Equal(t, "warming_up", st.Raw)
	require.Contains(t, logs.String(), `"provider_status":"warming_up"`)
	require.Contains(t, logs.String(), `"level":"warn"`)
}

// Outputs are kept as long as the job's submit asked: the retention in its
// RefData, else the route's option, else 14 days. Past it the outputs'
// URLs answer 404, and the job is expired, not succeeded; a prediction
// record past its retention is expired too, not lost.
func TestExpiredOutputsAndRecords(t *testing.T) {
	t.Parallel()
	f := providertest.NewTLSServer(t, map[string]providertest.Reply{"GET " + predPath: ok(t, "status_completed.json")})
	a, clk, _ := newAdapter(t, f, `{"object_expiration_hours":24}`, soon)
	submitted := json.RawMessage(`{"at":1795946400,"oh":48,"rh":72}`)

	st, err := a.Status(context.Background(), provider.Ref{ID: predID, Model: model, Data: submitted})
	require.NoError(t, err)
	require.Equal(t, state.Succeeded, st.State)
	require.Equal(t, completed.Add(48*time.Hour), st.OutputsExpireAt, "what the submit asked for")
	st, err = a.Status(context.Background(), provider.Ref{ID: predID, Model: model})
	require.NoError(t, err)
	require.Equal(t, completed.Add(24*time.Hour), st.OutputsExpireAt, "a tracked job: the route's option")

	clk.Set(completed.Add(48 * time.Hour))
	st, err = a.Status(context.Background(), provider.Ref{ID: predID, Model: model, Data: submitted})
	require.NoError(t, err)
	require.Equal(t, state.Expired, st.State, "outputs past their retention are gone")
	require.Empty(t, st.Outputs)
	require.Contains(t, st.Reason, "expired")

	// The record itself: 404 within its retention reconciles; after it,
	// the job is expired.
	f.Set("GET "+predPath, providertest.Reply{Status: 404, Body: fixture(t, "error_not_found.json")})
	clk.Set(created.Add(71 * time.Hour))
	_, err = a.Status(context.Background(), provider.Ref{ID: predID, Model: model, Data: submitted})
	require.Equal(t, provider.NotFound, provider.ClassOf(err))
	require.Contains(t, err.Error(), "prediction not found")
	clk.Set(created.Add(73 * time.Hour))
	st, err = a.Status(context.Background(), provider.Ref{ID: predID, Model: model, Data: submitted})
	require.NoError(t, err)
	require.Equal(t, state.Expired, st.State)
	require.Contains(t, st.Reason, "72 h")
	_, err = a.Status(context.Background(), provider.Ref{ID: predID, Model: model})
	require.Equal(t, provider.NotFound, provider.ClassOf(err), "without a known retention, 404 reconciles")
}

func TestSubmitErrors(t *testing.T) {
	t.Parallel()
	// At submit, a 404 is an unknown model: the input's fault.
	f := providertest.NewTLSServer(t, map[string]providertest.Reply{"POST /api/v1/model/generateVideo": {Status: 404, Body: fixture(t, "error_unknown_model.json")}})
	a, _, _ := newAdapter(t, f, "", soon)
	_, err := a.Submit(context.Background(), provider.SubmitRequest{Model: model})
	require.Equal(t, provider.Invalid, provider.ClassOf(err))
	require.Contains(t, err.Error(), "model not found")
	f.Set("POST /api/v1/model/generateVideo", providertest.Reply{Status: 200, Body: fixture(t, "error_unknown_model.json")})
	_, err = a.Submit(context.Background(), provider.SubmitRequest{Model: model})
	require.Equal(t, provider.Invalid, provider.ClassOf(err), "the same inside a 200")
	f.Set("POST /api/v1/model/generateVideo", providertest.Reply{Status: 400, Body: []byte(`{"code":400,"msg":"invalid webhook_url","data":null}`)})
	_, err = a.Submit(context.Background(), provider.SubmitRequest{Model: model})
	require.Equal(t, provider.Invalid, provider.ClassOf(err))
	require.Contains(t, err.Error(), "invalid webhook_url")

	// A bad id never reaches the API.
	_, err = a.Status(context.Background(), provider.Ref{ID: "../models"})
	require.Equal(t, provider.Invalid, provider.ClassOf(err))
}

func TestModelValidation(t *testing.T) {
	t.Parallel()
	const models, create = "GET /api/v1/models", "POST /api/v1/model/generateVideo"
	f := providertest.NewTLSServer(t, map[string]providertest.Reply{models: ok(t, "models.json"), create: ok(t, "submit.json")})
	a, clk, logs := newAdapter(t, f, `{"validate_models":true}`, created)

	_, err := a.Submit(context.Background(), provider.SubmitRequest{Model: model})
	require.NoError(t, err)
	_, err = a.Submit(context.Background(), provider.SubmitRequest{Model: "minimax/hailuo-02/i2v-standard"})
	require.NoError(t, err, "a model hidden from the console is still a model")
	_, err = a.Submit(context.Background(), provider.SubmitRequest{Model: "KwaiVGI/Kling-v3.0-std/text-to-video"})
	require.NoError(t, err, "ids compare without case")
	require.Equal(t, 1, f.Count(models), "the list is cached")

	_, err = a.Submit(context.Background(), provider.SubmitRequest{Model: "kwaivgi/kling-v9/text-to-video"})
	require.Equal(t, provider.Invalid, provider.ClassOf(err))
	require.Contains(t, err.Error(), "not in Atlas Cloud's published model list")
	for range 5 {
		_, err = a.Submit(context.Background(), provider.SubmitRequest{Model: "kwaivgi/kling-v9/text-to-video"})
		require.Equal(t, provider.Invalid, provider.ClassOf(err))
	}
	require.Equal(t, 3, f.Count(create), "no billable call for an unknown model")
	require.Equal(t, 1, f.Count(models), "misses refresh at most once a minute")

	// A model published since: after a minute, a miss refreshes the list.
	f.Set(models, providertest.Reply{Status: 200, Body: []byte(`{"data":[{"model":"kwaivgi/kling-v9/text-to-video"}]}`)})
	clk.Set(created.Add(time.Minute))
	_, err = a.Submit(context.Background(), provider.SubmitRequest{Model: "kwaivgi/kling-v9/text-to-video"})
	require.NoError(t, err)
	require.Equal(t, 2, f.Count(models))

	// The list expires after models_ttl; when it cannot be fetched the last
	// one stands, and with none at all the submit goes through.
	f.Set(models, providertest.Reply{Status: 503})
	clk.Set(created.Add(20 * time.Minute))
	_, err = a.Submit(context.Background(), provider.SubmitRequest{Model: model})
	require.Equal(t, provider.Invalid, provider.ClassOf(err), "the last good list stands")
	require.Equal(t, 3, f.Count(models))
	require.Contains(t, logs.String(), "model list could not be fetched")

	g := providertest.NewTLSServer(t, map[string]providertest.Reply{models: {Status: 500}, create: ok(t, "submit.json")})
	b, _, _ := newAdapter(t, g, `{"validate_models":true}`, created)
	_, err = b.Submit(context.Background(), provider.SubmitRequest{Model: model})
	require.NoError(t, err, "no list at all: Atlas Cloud's own 404 decides")
	require.Equal(t, 1, g.Count(create))

	// Off by default: no list is fetched.
	h := providertest.NewTLSServer(t, map[string]providertest.Reply{create: ok(t, "submit.json")})
	c, _, _ := newAdapter(t, h, "", created)
	_, err = c.Submit(context.Background(), provider.SubmitRequest{Model: "whatever/model"})
	require.NoError(t, err)
	require.Equal(t, 0, h.Count(models))
}

func TestInfoCancelAndConfig(t *testing.T) {
	t.Parallel()
	f := providertest.NewTLSServer(t, map[string]providertest.Reply{})
	a, _, _ := newAdapter(t, f, "", created)
	require.Equal(t, provider.Info{Kind: atlas.Kind, Webhooks: true}, a.Info(), "no cancel, no idempotency key")
	_, err := a.Cancel(context.Background(), provider.Ref{ID: predID})
	require.ErrorIs(t, err, provider.ErrUnsupported)
	require.Empty(t, f.Requests())

	for name, cfg := range map[string]provider.Config{
		"token":                   {Route: "a"},
		"webhook secret":          {Route: "a", Token: "t", WebhookSecret: "whsec_x"},
		"bogus":                   {Route: "a", Token: "t", Options: json.RawMessage(`{"bogus":1}`)},
		"options.media":           {Route: "a", Token: "t", Options: json.RawMessage(`{"media":"3d"}`)},
		"object_expiration_hours": {Route: "a", Token: "t", Options: json.RawMessage(`{"object_expiration_hours":337}`)},
		"request_retention_hours": {Route: "a", Token: "t", Options: json.RawMessage(`{"request_retention_hours":-1}`)},
		"models_ttl":              {Route: "a", Token: "t", Options: json.RawMessage(`{"models_ttl":"5s"}`)},
		"jwks_url":                {Route: "a", Token: "t", Options: json.RawMessage(`{"jwks_url":"http://x.example/jwks"}`)},
		"base_url":                {Route: "a", Token: "t", BaseURL: "ftp://api.atlascloud.ai"},
	} {
		_, err := atlas.New(cfg)
		require.ErrorContains(t, err, name)
	}
	b, err := atlas.New(provider.Config{Route: "a", Token: "t"})
	require.NoError(t, err)
	require.Equal(t, atlas.Kind, b.Info().Kind)
	require.True(t, strings.HasPrefix(atlas.DefaultBaseURL, "https://"))
}

func FuzzParsePrediction(f *testing.F) {
	for _, name := range []string{"status_starting.json", "status_processing.json", "status_completed.json",
		"status_succeeded_output.json", "status_top_level.json", "status_failed.json", "status_error_code_only.json",
		"status_timeout.json", "status_cancelled.json", "status_unknown.json", "error_not_found.json", "submit.json"} {
		f.Add(fixture(f, name))
	}
	f.Add([]byte(`{"data":{"id":"x","status":"completed","error_code":0,"outputs":[{"url":"https://a.example/v.mp4"}]}}`))
	f.Add([]byte(`{"code":"503","msg":"busy","data":[]}`))
	terminal := map[string]bool{"completed": true, "succeeded": true, "failed": true, "timeout": true, "cancelled": true, "canceled": true}
	f.Fuzz(func(t *testing.T, body []byte) {
		st, err := atlas.ParsePrediction(predID, body, 14*24*time.Hour, soon)
		if err != nil {
			require.NotEqual(t, provider.Invalid, provider.ClassOf(err), "a status answer never makes the input invalid")
			return
		}
		require.Equal(t, predID, st.RemoteID)
		if st.State.Terminal() && st.State != state.Failed {
			require.True(t, terminal[strings.ToLower(strings.TrimSpace(st.Raw))], "terminal only from a known value, got %q", st.Raw)
		}
		if st.State == state.Failed {
			require.NotEmpty(t, st.Reason)
		}
		for _, u := range st.Outputs {
			require.True(t, provider.IsOutputURL(u))
		}
	})
}

func FuzzParseSubmit(f *testing.F) {
	for _, name := range []string{"submit.json", "submit_prediction_id.json", "submit_top_level.json", "error_unknown_model.json"} {
		f.Add(fixture(f, name))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		st, err := atlas.ParseSubmit(body, soon)
		if err != nil {
			return
		}
		require.NotEmpty(t, st.RemoteID)
		require.NotContains(t, st.RemoteID, "/")
		require.Equal(t, state.Queued, st.State)
	})
}

func TestConformance(t *testing.T) {
	t.Parallel()
	sample := func(code int, name string) providertest.Reply {
		return providertest.Reply{Status: code, Body: fixture(t, name)}
	}
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T, srv *providertest.Server) provider.Adapter {
			a, _, _ := newAdapter(t, srv, "", soon)
			return a
		},
		TLS:         true,
		Token:       testToken,
		Submit:      provider.SubmitRequest{JobID: "j1", Model: model, Input: json.RawMessage(`{"prompt":"a kite"}`)},
		SubmitKey:   "POST /api/v1/model/generateVideo",
		SubmitReply: ok(t, "submit.json"),
		SubmittedID: predID,
		Ref:         provider.Ref{ID: predID, Model: model},
		StatusKey:   "GET " + predPath,
		States: []providertest.StateCase{
			{Name: "status_starting.json", Reply: ok(t, "status_starting.json"), State: state.Queued, Check: func(t *testing.T, st provider.Status) {
				require.Equal(t, "starting", st.Raw)
				require.Equal(t, created, st.CreatedAt)
			}},
			{Name: "status_processing.json", Reply: ok(t, "status_processing.json"), State: state.Running},
			{Name: "status_completed.json", Reply: ok(t, "status_completed.json"), State: state.Succeeded, Check: func(t *testing.T, st provider.Status) {
				require.Equal(t, []string{outputURL}, st.Outputs)
				require.Equal(t, completed, st.CompletedAt)
				require.Equal(t, completed.Add(14*24*time.Hour), st.OutputsExpireAt, "kept 14 days by default")
			}},
			{Name: "status_succeeded_output.json", Reply: ok(t, "status_succeeded_output.json"), State: state.Succeeded, Check: func(t *testing.T, st provider.Status) {
				require.Equal(t, "succeeded", st.Raw)
				require.Equal(t, []string{outputURL}, st.Outputs, "output as one string")
				require.Equal(t, time.Unix(1796032800, 0).UTC(), st.CreatedAt, "Unix seconds")
				require.Equal(t, time.UnixMilli(1796032900000).UTC(), st.CompletedAt, "Unix milliseconds")
			}},
			{Name: "status_top_level.json", Reply: ok(t, "status_top_level.json"), State: state.Succeeded, Check: func(t *testing.T, st provider.Status) {
				require.Equal(t, []string{outputURL}, st.Outputs, "the older shape without the envelope")
			}},
			{Name: "status_failed.json", Reply: ok(t, "status_failed.json"), State: state.Failed, Check: func(t *testing.T, st provider.Status) {
				require.Equal(t, "input rejected by content moderation (code 1039)", st.Reason)
				require.Empty(t, st.Outputs)
			}},
			{Name: "status_error_code_only.json", Reply: ok(t, "status_error_code_only.json"), State: state.Failed, Check: func(t *testing.T, st provider.Status) {
				require.Equal(t, "input rejected by content moderation (code 1039)", st.Reason, "HTTP 200, an error code and no status")
			}},
			{Name: "status_timeout.json", Reply: ok(t, "status_timeout.json"), State: state.Failed, Check: func(t *testing.T, st provider.Status) {
				require.Equal(t, "the prediction timed out at Atlas Cloud", st.Reason)
			}},
			{Name: "status_cancelled.json", Reply: ok(t, "status_cancelled.json"), State: state.Canceled},
			{Name: "status_unknown.json", Reply: ok(t, "status_unknown.json"), State: state.Unknown},
		},
		NotFound: sample(404, "error_not_found.json"),
		Errors: []providertest.ErrorCase{
			{Name: "401 sample", Reply: sample(401, "error_unauthorized.json"), Class: provider.Auth, Message: "invalid api key"},
			{Name: "402 pauses like auth", Reply: sample(402, "error_insufficient_balance.json"), Class: provider.Auth, Message: "insufficient balance"},
			{Name: "429 sample", Reply: sample(429, "error_rate_limited.json"), Class: provider.RateLimited, Message: "rate limit exceeded"},
			{Name: "404 sample", Reply: sample(404, "error_not_found.json"), Class: provider.NotFound, Message: "prediction not found"},
			{Name: "200 with an error envelope", Reply: sample(200, "error_not_found.json"), Class: provider.NotFound, Message: "prediction not found"},
			{Name: "200 with a 429 envelope", Reply: sample(200, "error_rate_limited.json"), Class: provider.RateLimited, Message: "rate limit exceeded"},
			{Name: "200 without a prediction", Reply: providertest.OK([]byte(`{"code":200,"data":null}`)), Class: provider.Transient, Message: "no prediction"},
		},
		PollAfter: true,
	})
}
