package generic_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/generic"
	"github.com/pollux-dev/pollux/pkg/provider/providertest"
	"github.com/pollux-dev/pollux/pkg/state"
)

// baseOptions is a small API: POST /jobs → {"job": {"id"}}, GET /jobs/{id}
// → {"state", "pct", "err", "out": [...], "times"}.
func baseOptions() map[string]any {
	return map[string]any{
		"base_url": "https://api.example.com",
		"submit":   map[string]any{"path": "/jobs", "model_field": "model", "id_path": "job.id"},
		"status": map[string]any{
			"path": "/jobs/{id}", "state_path": "state", "progress_path": "pct", "progress_scale": 100,
			"reason_paths": []string{"err.code", "err.msg"}, "result_path": "out[*].url",
			"created_at_path": "times.created", "started_at_path": "times.started", "completed_at_path": "times.done",
		},
		"states": map[string]string{
			"waiting": "queued", "busy": "running", "ok": "succeeded", "bad": "failed",
			"stopped": "canceled", "gone": "expired", "lost": "not_found", "paused": "unknown",
		},
	}
}

func newGeneric(t *testing.T, f *providertest.Server, opts map[string]any, token string) *generic.Adapter {
	t.Helper()
	raw, err := json.Marshal(opts)
	require.NoError(t, err)
	a, err := generic.NewAdapter(provider.Config{Route: "g", Kind: generic.Kind, BaseURL: f.URL, Token: token, Options: raw})
	require.NoError(t, err)
	return a
}

func body(s string) providertest.Reply { return providertest.Reply{Status: 200, Body: []byte(s)} }

func TestStatusMapsEveryConfiguredState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		answer string
		state  state.State
		class  *provider.Class
		check  func(*testing.T, provider.Status)
	}{
		{`{"state":"waiting","times":{"created":"2026-11-29T10:00:00Z"}}`, state.Queued, nil, func(t *testing.T, st provider.Status) {
			require.Equal(t, time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), st.CreatedAt)
		}},
		{`{"state":"busy","pct":42,"times":{"started":"2026-11-29T10:00:05Z","done":"2026-11-29T10:09:00Z"}}`, state.Running, nil, func(t *testing.T, st provider.Status) {
			require.InDelta(t, 0.42, *st.Progress, 1e-9)
			require.Equal(t, time.Date(2026, 11, 29, 10, 0, 5, 0, time.UTC), st.StartedAt)
			require.True(t, st.CompletedAt.IsZero(), "completion is read for terminal jobs only")
		}},
		{`{"state":"busy","pct":250}`, state.Running, nil, func(t *testing.T, st provider.Status) { require.InDelta(t, 1.0, *st.Progress, 1e-9) }},
		{`{"state":"busy","pct":"42"}`, state.Running, nil, func(t *testing.T, st provider.Status) { require.Nil(t, st.Progress) }},
		{`{"state":"ok","out":[{"url":"https://cdn.example/a.mp4"},{"url":"ftp://x"},{"url":5},{"url":"https://cdn.example/b.mp4"}]}`, state.Succeeded, nil, func(t *testing.T, st provider.Status) {
			require.Equal(t, []string{"https://cdn.example/a.mp4", "https://cdn.example/b.mp4"}, st.Outputs)
		}},
		{`{"state":"ok"}`, state.Succeeded, nil, func(t *testing.T, st provider.Status) { require.Empty(t, st.Outputs) }},
		{`{"state":"bad","err":{"code":"E42","msg":"the model refused"}}`, state.Failed, nil, func(t *testing.T, st provider.Status) {
			require.Equal(t, "E42: the model refused", st.Reason)
		}},
		{`{"state":"bad"}`, state.Failed, nil, func(t *testing.T, st provider.Status) { require.Equal(t, `the provider reported "bad"`, st.Reason) }},
		{`{"state":"stopped"}`, state.Canceled, nil, nil},
		{`{"state":"gone"}`, state.Expired, nil, nil},
		{`{"state":"paused"}`, state.Unknown, nil, nil},
		{`{"state":"never-heard-of"}`, state.Unknown, nil, nil},
		{`{"state":"OK"}`, state.Unknown, nil, nil}, // values are matched exactly
		{`{"state":{"nested":1}}`, state.Unknown, nil, nil},
		{`{}`, state.Unknown, nil, nil},
		{`{"state":"lost"}`, "", ptr(provider.NotFound), nil},
	}
	for _, tt := range tests {
		f := providertest.NewServer(t, map[string]providertest.Reply{"GET /jobs/j-1": body(tt.answer)})
		st, err := newGeneric(t, f, baseOptions(), "tok").Status(context.Background(), provider.Ref{ID: "j-1"})
		if tt.class != nil {
			require.Equal(t, *tt.class, provider.ClassOf(err), tt.answer)
			continue
		}
		require.NoError(t, err, tt.answer)
		require.Equal(t, tt.state, st.State, tt.answer)
		require.Equal(t, "j-1", st.RemoteID)
		if tt.check != nil {
			tt.check(t, st)
		}
	}
}

func TestSubmitBody(t *testing.T) {
	t.Parallel()
	f := providertest.NewServer(t, map[string]providertest.Reply{"*": body(`{"job":{"id":"j-1"}}`)})
	opts := baseOptions()
	a := newGeneric(t, f, opts, "tok")
	st, err := a.Submit(context.Background(), provider.SubmitRequest{Model: "m-1", Input: json.RawMessage(`{"prompt":"p"}`)})
	require.NoError(t, err)
	require.Equal(t, "j-1", st.RemoteID)
	require.Equal(t, state.Queued, st.State)
	require.JSONEq(t, `{"model":"m-1","prompt":"p"}`, string(f.Last().Body))
	require.Equal(t, "Bearer tok", f.Last().Header.Get("Authorization"))

	_, err = a.Submit(context.Background(), provider.SubmitRequest{Model: "m-1", Input: json.RawMessage(`{"model":"m-2"}`)})
	require.Equal(t, provider.Invalid, provider.ClassOf(err), "the input may not name another model")
	_, err = a.Submit(context.Background(), provider.SubmitRequest{Model: "m-1", Input: json.RawMessage(`{"model":"m-1"}`)})
	require.NoError(t, err, "the same model is fine")

	opts["submit"] = map[string]any{"path": "/v2/{endpoint}/{model}", "input_field": "input", "model_field": "version", "id_path": "job.id"}
	opts["default_endpoint"] = "predict"
	a = newGeneric(t, f, opts, "tok")
	_, err = a.Submit(context.Background(), provider.SubmitRequest{Model: "m-1", Input: json.RawMessage(`{"prompt":"p","version":"x"}`)})
	require.NoError(t, err)
	require.Equal(t, "/v2/predict/m-1", f.Last().Path)
	require.JSONEq(t, `{"input":{"prompt":"p","version":"x"},"version":"m-1"}`, string(f.Last().Body), "the model sits beside the input")
	_, err = a.Submit(context.Background(), provider.SubmitRequest{Model: "other:m-1"})
	require.NoError(t, err)
	require.Equal(t, "/v2/other/m-1", f.Last().Path)
}

// A signed callback with a URL field gets the job's webhook URL in the
// submit body, as an unsigned one does.
func TestSignedCallbackURLField(t *testing.T) {
	t.Parallel()
	f := providertest.NewServer(t, map[string]providertest.Reply{"*": body(`{"job":{"id":"j-1"}}`)})
	opts := baseOptions()
	opts["callback"] = map[string]any{"signature": "standard_webhooks", "id_path": "data.id", "url_field": "webhook_url"}
	raw, err := json.Marshal(opts)
	require.NoError(t, err)
	a, err := generic.NewAdapter(provider.Config{Route: "g", Kind: generic.Kind, BaseURL: f.URL, Token: "tok",
		WebhookSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Options: raw})
	require.NoError(t, err)
	_, err = a.Submit(context.Background(), provider.SubmitRequest{Model: "m-1", WebhookURL: "https://hooks.example/w?job=j"})
	require.NoError(t, err)
	require.JSONEq(t, `{"model":"m-1","webhook_url":"https://hooks.example/w?job=j"}`, string(f.Last().Body))
	_, err = generic.NewAdapter(provider.Config{Route: "g", Kind: generic.Kind, BaseURL: f.URL, Token: "tok",
		WebhookSecret: "whsec_short", Options: raw})
	require.ErrorContains(t, err, "webhook secret")
}

func TestSubmitRefusesWithoutACall(t *testing.T) {
	t.Parallel()
	f := providertest.NewServer(t, nil)
	a := newGeneric(t, f, baseOptions(), "tok")
	for _, tt := range []struct{ model, input string }{
		{"", `{}`}, {"../etc", `{}`}, {"a/b", `{}`}, {"m?x=1", `{}`}, {"m-1", `[]`}, {"m-1", `"s"`}, {"m-1", `{`},
	} {
		_, err := a.Submit(context.Background(), provider.SubmitRequest{Model: tt.model, Input: json.RawMessage(tt.input)})
		require.Equal(t, provider.Invalid, provider.ClassOf(err), "%+v", tt)
	}
	require.Empty(t, f.Requests())
}

func TestSubmitWithoutAnIDIsNotASuccess(t *testing.T) {
	t.Parallel()
	for _, answer := range []string{`{}`, `{"job":{"id":""}}`, `{"job":{"id":"../x"}}`, `{"job":{"id":{"x":1}}}`, `not json`} {
		f := providertest.NewServer(t, map[string]providertest.Reply{"*": body(answer)})
		_, err := newGeneric(t, f, baseOptions(), "tok").Submit(context.Background(), provider.SubmitRequest{Model: "m-1"})
		require.Equal(t, provider.Transient, provider.ClassOf(err), answer)
	}
	f := providertest.NewServer(t, map[string]providertest.Reply{"*": body(`{"job":{"id":12345}}`)})
	st, err := newGeneric(t, f, baseOptions(), "tok").Submit(context.Background(), provider.SubmitRequest{Model: "m-1"})
	require.NoError(t, err)
	require.Equal(t, "12345", st.RemoteID, "a numeric id is kept as written")
}

func TestPlaceholdersAreEscapedAndChecked(t *testing.T) {
	t.Parallel()
	f := providertest.NewServer(t, map[string]providertest.Reply{"*": body(`{"state":"busy"}`)})
	opts := baseOptions()
	opts["status"].(map[string]any)["path"] = "/q/{model}?task_id={id}"
	a := newGeneric(t, f, opts, "tok")
	_, err := a.Status(context.Background(), provider.Ref{ID: "a:b.c-1", Model: "m.1"})
	require.NoError(t, err)
	require.Equal(t, "/q/m.1", f.Last().Path)
	require.Equal(t, "task_id=a%3Ab.c-1", f.Last().RawQuery)
	n := len(f.Requests())
	for _, id := range []string{"", "../x", "a/b", "a?b=1", "a&b=1", "a#b", "a b", ".hidden"} {
		_, err := a.Status(context.Background(), provider.Ref{ID: id, Model: "m.1"})
		require.Equal(t, provider.Invalid, provider.ClassOf(err), id)
	}
	require.Len(t, f.Requests(), n, "no call for a bad id")
}

func TestHTTP404(t *testing.T) {
	t.Parallel()
	f := providertest.NewServer(t, map[string]providertest.Reply{"*": {Status: 404, Body: []byte(`{"message":"no such job"}`)}})
	_, err := newGeneric(t, f, baseOptions(), "tok").Status(context.Background(), provider.Ref{ID: "j-1"})
	require.Equal(t, provider.NotFound, provider.ClassOf(err), "default: reconcile")

	opts := baseOptions()
	opts["http_404_is"] = "expired"
	st, err := newGeneric(t, f, opts, "tok").Status(context.Background(), provider.Ref{ID: "j-1"})
	require.NoError(t, err)
	require.Equal(t, state.Expired, st.State)
}

func TestCacheBusterAndHeaders(t *testing.T) {
	t.Parallel()
	f := providertest.NewServer(t, map[string]providertest.Reply{"*": body(`{"state":"busy"}`)})
	opts := baseOptions()
	opts["status"].(map[string]any)["cache_buster"] = "t"
	opts["headers"] = map[string]string{"X-Client": "pollux"}
	opts["auth"] = map[string]any{"header": "X-API-Key", "format": "{token}"}
	a := newGeneric(t, f, opts, "tok")
	at := time.Unix(1796032800, 5)
	a.SetNow(func() time.Time { return at })
	_, err := a.Status(context.Background(), provider.Ref{ID: "j-1"})
	require.NoError(t, err)
	req := f.Last()
	require.Equal(t, "t=1796032800000000005", req.RawQuery)
	require.Equal(t, "pollux", req.Header.Get("X-Client"))
	require.Equal(t, "tok", req.Header.Get("X-API-Key"))
	require.Empty(t, req.Header.Get("Authorization"))
}

func TestTimeFormatsAndExpiry(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	done := created.Add(5 * time.Minute)
	tests := []struct {
		format, created, done string
	}{
		{"", `"2026-11-29T10:00:00Z"`, `"2026-11-29T12:05:00+02:00"`},
		{"unix", `1795946400`, `"1795946700"`},
		{"unix_ms", `1795946400000`, `1795946700000`},
		{"2006-01-02 15:04:05.000", `"2026-11-29 10:00:00.000"`, `"2026-11-29 10:05:00.000"`},
	}
	for _, tt := range tests {
		opts := baseOptions()
		opts["status"].(map[string]any)["time_format"] = tt.format
		opts["outputs_ttl"] = "24h"
		f := providertest.NewServer(t, map[string]providertest.Reply{"*": body(`{"state":"ok","out":[{"url":"https://cdn.example/a.mp4"}],"times":{"created":` + tt.created + `,"done":` + tt.done + `}}`)})
		st, err := newGeneric(t, f, opts, "tok").Status(context.Background(), provider.Ref{ID: "j-1"})
		require.NoError(t, err, tt.format)
		require.Equal(t, created, st.CreatedAt, tt.format)
		require.Equal(t, done, st.CompletedAt, tt.format)
		require.Equal(t, done.Add(24*time.Hour), st.OutputsExpireAt, tt.format)
	}

	// Without a completion time, from creation; without either, from now.
	opts := baseOptions()
	opts["outputs_ttl"] = "1h"
	f := providertest.NewServer(t, map[string]providertest.Reply{"*": body(`{"state":"ok","out":[{"url":"https://cdn.example/a.mp4"}],"times":{"created":"2026-11-29T10:00:00Z","done":"yesterday"}}`)})
	st, err := newGeneric(t, f, opts, "tok").Status(context.Background(), provider.Ref{ID: "j-1"})
	require.NoError(t, err)
	require.True(t, st.CompletedAt.IsZero(), "an unreadable time is left out")
	require.Equal(t, created.Add(time.Hour), st.OutputsExpireAt)
	f.Set("*", body(`{"state":"ok","out":[{"url":"https://cdn.example/a.mp4"}],"times":{"created":0}}`))
	a := newGeneric(t, f, opts, "tok")
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	a.SetNow(func() time.Time { return now })
	st, err = a.Status(context.Background(), provider.Ref{ID: "j-1"})
	require.NoError(t, err)
	require.True(t, st.CreatedAt.IsZero(), "an implausible time is left out")
	require.Equal(t, now.Add(time.Hour), st.OutputsExpireAt)
}

func TestBodyErrors(t *testing.T) {
	t.Parallel()
	opts := baseOptions()
	opts["errors"] = map[string]any{
		"code_path": "status_code", "message_path": "status_msg",
		"classes": map[string]string{"7": "failed", "9": "not_found"},
	}
	tests := []struct {
		answer string
		class  provider.Class
		failed bool
	}{
		{`{"status_code":7,"status_msg":"refused","state":"busy"}`, provider.Invalid, true},
		{`{"status_code":9,"status_msg":"no such job"}`, provider.NotFound, false},
		{`{"status_code":3,"status_msg":"hiccup"}`, provider.Transient, false}, // unmapped: the default
		{`{"status_code":"7","status_msg":"as text"}`, provider.Invalid, true},
	}
	for _, tt := range tests {
		f := providertest.NewServer(t, map[string]providertest.Reply{"*": body(tt.answer)})
		a := newGeneric(t, f, opts, "tok")
		st, err := a.Status(context.Background(), provider.Ref{ID: "j-1"})
		if tt.failed {
			require.NoError(t, err, tt.answer)
			require.Equal(t, state.Failed, st.State, tt.answer)
		} else {
			require.Equal(t, tt.class, provider.ClassOf(err), tt.answer)
		}
		_, err = a.Submit(context.Background(), provider.SubmitRequest{Model: "m-1"})
		require.Equal(t, tt.class, provider.ClassOf(err), "at submit: %s", tt.answer)
	}
	f := providertest.NewServer(t, map[string]providertest.Reply{"*": body(`{"status_code":0,"state":"busy"}`)})
	st, err := newGeneric(t, f, opts, "tok").Status(context.Background(), provider.Ref{ID: "j-1"})
	require.NoError(t, err)
	require.Equal(t, state.Running, st.State, "0 is the default success code")
}

func TestCancel(t *testing.T) {
	t.Parallel()
	opts := baseOptions()
	f := providertest.NewServer(t, map[string]providertest.Reply{"GET /jobs/j-1": body(`{"state":"busy"}`), "POST /jobs/j-1/cancel": {Status: 202}})
	_, err := newGeneric(t, f, opts, "tok").Cancel(context.Background(), provider.Ref{ID: "j-1"})
	require.ErrorIs(t, err, provider.ErrUnsupported, "no cancel configured")

	opts["cancel"] = map[string]any{"path": "/jobs/{id}/cancel"}
	a := newGeneric(t, f, opts, "tok")
	require.True(t, a.Info().Cancel)
	st, err := a.Cancel(context.Background(), provider.Ref{ID: "j-1"})
	require.NoError(t, err)
	require.Equal(t, state.Unknown, st.State, "an answer that says nothing final: polling tells")
	require.Equal(t, "/jobs/j-1/cancel", f.Last().Path)

	f.Set("GET /jobs/j-1", body(`{"state":"ok"}`))
	st, err = a.Cancel(context.Background(), provider.Ref{ID: "j-1"})
	require.NoError(t, err)
	require.Equal(t, state.Succeeded, st.State)
	require.Equal(t, http.MethodGet, f.Last().Method, "a finished job is left alone")

	f.Set("GET /jobs/j-1", body(`{"state":"busy"}`))
	f.Set("POST /jobs/j-1/cancel", providertest.Reply{Status: 409, Body: []byte(`{"message":"already running"}`)})
	_, err = a.Cancel(context.Background(), provider.Ref{ID: "j-1"})
	require.Equal(t, provider.Transient, provider.ClassOf(err))
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(map[string]any)
		want   string
	}{
		{"unknown field", func(o map[string]any) { o["bogus"] = 1 }, "bogus"},
		{"unknown nested field", func(o map[string]any) { o["status"].(map[string]any)["stat_path"] = "x" }, "stat_path"},
		{"no base url", func(o map[string]any) { delete(o, "base_url") }, "options.base_url"},
		{"base url with a query", func(o map[string]any) { o["base_url"] = "https://x.example/?a=1" }, "options.base_url"},
		{"no submit path", func(o map[string]any) { o["submit"].(map[string]any)["path"] = "" }, "options.submit.path"},
		{"submit path without /", func(o map[string]any) { o["submit"].(map[string]any)["path"] = "jobs" }, "options.submit.path"},
		{"{id} at submit", func(o map[string]any) { o["submit"].(map[string]any)["path"] = "/jobs/{id}" }, "{id} is not available"},
		{"unclosed placeholder", func(o map[string]any) { o["status"].(map[string]any)["path"] = "/jobs/{id" }, "options.status.path"},
		{"bad method", func(o map[string]any) { o["status"].(map[string]any)["method"] = "FETCH" }, "options.status.method"},
		{"no id path", func(o map[string]any) { o["submit"].(map[string]any)["id_path"] = "" }, "options.submit.id_path"},
		{"bad id path", func(o map[string]any) { o["submit"].(map[string]any)["id_path"] = "a..b" }, "options.submit.id_path"},
		{"bad result path", func(o map[string]any) { o["status"].(map[string]any)["result_path"] = "out[x]" }, "options.status.result_path"},
		{"no states", func(o map[string]any) { delete(o, "states") }, "options.states"},
		{"bad state", func(o map[string]any) { o["states"] = map[string]string{"x": "done"} }, "options.states.x"},
		{"bad 404", func(o map[string]any) { o["http_404_is"] = "failed" }, "options.http_404_is"},
		{"unsigned callback without url field", func(o map[string]any) { o["callback"] = map[string]any{"id_path": "id"} }, "options.callback.url_field"},
		{"unknown callback signature", func(o map[string]any) {
			o["callback"] = map[string]any{"id_path": "id", "signature": "hmac"}
		}, "options.callback.signature"},
		{"bad output path", func(o map[string]any) { o["status"].(map[string]any)["output_path"] = "/x/{model}" }, "options.status.output_path"},
		{"bad expires path", func(o map[string]any) { o["status"].(map[string]any)["expires_at_path"] = "a[" }, "options.status.expires_at_path"},
		{"bad duration", func(o map[string]any) { o["poll_floor"] = 15 }, "duration"},
		{"negative duration", func(o map[string]any) { o["outputs_ttl"] = "-1h" }, "negative"},
		{"auth format without token", func(o map[string]any) { o["auth"] = map[string]any{"format": "Bearer"} }, "options.auth.format"},
		{"bad header", func(o map[string]any) { o["headers"] = map[string]string{"Bad Header": "x"} }, "options.headers"},
		{"header with a newline", func(o map[string]any) { o["headers"] = map[string]string{"X-A": "a\r\nX-B: b"} }, "options.headers"},
		{"bad error class", func(o map[string]any) {
			o["errors"] = map[string]any{"code_path": "c", "classes": map[string]string{"1": "boom"}}
		}, "options.errors.classes.1"},
		{"follow-up without a result", func(o map[string]any) { o["follow_up"] = map[string]any{"path": "/f/{id}"} }, "options.follow_up.result_path"},
		{"follow-up param shadows id", func(o map[string]any) {
			o["follow_up"] = map[string]any{"path": "/f/{id}", "params": map[string]string{"id": "x"}, "result_path": "u"}
		}, "options.follow_up.params"},
		{"follow-up unknown placeholder", func(o map[string]any) {
			o["follow_up"] = map[string]any{"path": "/f/{file}", "result_path": "u"}
		}, "{file} is not available"},
		{"cancel state", func(o map[string]any) { o["cancel"] = map[string]any{"path": "/c/{id}", "state": "failed"} }, "options.cancel.state"},
		{"short jwt", func(o map[string]any) { o["auth"] = map[string]any{"jwt": map[string]any{"ttl": "10s"}} }, "options.auth.jwt.ttl"},
	}
	for _, tt := range tests {
		opts := baseOptions()
		tt.change(opts)
		raw, err := json.Marshal(opts)
		require.NoError(t, err)
		_, err = generic.New(provider.Config{Route: "g", Token: "tok", Options: raw})
		require.ErrorContains(t, err, tt.want, tt.name)
	}
	raw, err := json.Marshal(baseOptions())
	require.NoError(t, err)
	_, err = generic.New(provider.Config{Route: "g", Options: raw})
	require.ErrorContains(t, err, "token")
	_, err = generic.New(provider.Config{Route: "g", Token: "tok"})
	require.ErrorContains(t, err, "options")
	_, err = generic.New(provider.Config{Route: "g", Token: "tok", WebhookSecret: "s", Options: raw})
	require.ErrorContains(t, err, "webhook")
	opts := baseOptions()
	opts["auth"] = map[string]any{"jwt": map[string]any{}}
	raw, err = json.Marshal(opts)
	require.NoError(t, err)
	_, err = generic.New(provider.Config{Route: "g", Token: "no-colon", Options: raw})
	require.ErrorContains(t, err, "<access key>:<secret key>")
	a, err := generic.New(provider.Config{Route: "g", Token: "ak:sk", Options: raw})
	require.NoError(t, err)
	require.Equal(t, generic.Kind, a.Info().Kind)
}

func ptr[T any](v T) *T { return &v }

// FuzzStatus feeds arbitrary answers to every example's status mapping:
// it never panics, and a terminal state comes only from a raw value the
// example maps to one, or from an error code meaning failed.
func FuzzStatus(f *testing.F) {
	names := []string{"luma", "kling", "minimax", "seedance", "wan", "openai"}
	type ex struct {
		a      *generic.Adapter
		states map[string]string
	}
	var exs []ex
	for _, name := range names {
		opts := loadExample(f, name)
		cfg := provider.Config{Route: name, Token: "ak:sk", Options: opts}
		if name == "openai" {
			cfg.WebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // its callbacks are signed
		}
		a, err := generic.NewAdapter(cfg)
		if err != nil {
			f.Fatal(err)
		}
		var o struct {
			States map[string]string `json:"states"`
		}
		if err := json.Unmarshal(opts, &o); err != nil {
			f.Fatal(err)
		}
		exs = append(exs, ex{a, o.States})
	}
	for _, file := range []string{"luma/completed.json", "kling/succeed.json", "minimax/success.json", "minimax/sensitive_output.json",
		"seedance/failed.json", "wan/unknown.json", "wan/succeeded.json", "openai/completed.json", "openai/failed.json"} {
		f.Add(fixture(f, file))
	}
	terminal := map[string]bool{"succeeded": true, "failed": true, "canceled": true, "expired": true}
	f.Fuzz(func(t *testing.T, answer []byte) {
		for _, e := range exs {
			st, err := e.a.ParseStatus(answer, "job-1")
			if err != nil {
				continue
			}
			require.Equal(t, "job-1", st.RemoteID)
			if st.State.Terminal() {
				fromCode := st.State == state.Failed && strings.Contains(st.Reason, "(code ")
				require.True(t, terminal[e.states[st.Raw]] || fromCode, "terminal %s from raw %q", st.State, st.Raw)
			}
			if st.Progress != nil {
				require.True(t, *st.Progress >= 0 && *st.Progress <= 1)
			}
			require.LessOrEqual(t, len(st.Outputs), 100)
		}
	})
}

// A status answer's hints reach the schedule: its poll-after headers, the
// provider's estimate of the time left (eta_path, seconds) and a queued
// job's place (queue_position_path). Nonsense is dropped, never believed.
func TestStatusHints(t *testing.T) {
	t.Parallel()
	opts := baseOptions()
	status := opts["status"].(map[string]any)
	status["eta_path"], status["queue_position_path"] = "eta_s", "queue.pos"
	for _, tt := range []struct {
		answer    providertest.Reply
		eta       time.Duration
		pollAfter time.Duration
		queue     *int
	}{
		{answer: body(`{"state":"busy","eta_s":95.5}`), eta: 95500 * time.Millisecond},
		{answer: body(`{"state":"waiting","eta_s":300,"queue":{"pos":4}}`), eta: 5 * time.Minute, queue: ptr(4)},
		{answer: body(`{"state":"waiting","queue":{"pos":2.5}}`)},
		{answer: body(`{"state":"waiting","queue":{"pos":-1},"eta_s":-3}`)},
		{answer: body(`{"state":"busy","eta_s":1e12}`)},
		{answer: body(`{"state":"busy","eta_s":"soon"}`)},
		{answer: body(`{"state":"ok","eta_s":30}`)}, // a finished job has no time left
		{answer: providertest.Reply{Status: 200, Header: http.Header{"Openai-Poll-After-Ms": {"2500"}}, Body: []byte(`{"state":"busy"}`)}, pollAfter: 2500 * time.Millisecond},
		{answer: providertest.Reply{Status: 202, Header: http.Header{"Retry-After": {"7"}}, Body: []byte(`{"state":"busy"}`)}, pollAfter: 7 * time.Second},
		{answer: providertest.Reply{Status: 200, Header: http.Header{"Retry-After": {"soon"}}, Body: []byte(`{"state":"busy"}`)}},
	} {
		f := providertest.NewServer(t, map[string]providertest.Reply{"GET /jobs/j-1": tt.answer})
		st, err := newGeneric(t, f, opts, "tok").Status(context.Background(), provider.Ref{ID: "j-1"})
		require.NoError(t, err, string(tt.answer.Body))
		require.Equal(t, tt.eta, st.ETA, string(tt.answer.Body))
		require.Equal(t, tt.pollAfter, st.PollAfter, string(tt.answer.Body))
		require.Equal(t, tt.queue, st.QueuePosition, string(tt.answer.Body))
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	opts := baseOptions()
	opts["cancel"] = map[string]any{"path": "/jobs/{id}/cancel"}
	get, cancel := "GET /jobs/j-1", "POST /jobs/j-1/cancel"
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T, srv *providertest.Server) provider.Adapter {
			return newGeneric(t, srv, opts, "secret-token")
		},
		Token:       "secret-token",
		Submit:      provider.SubmitRequest{Model: "m-1", Input: json.RawMessage(`{"prompt":"p"}`)},
		SubmitKey:   "POST /jobs",
		SubmitReply: body(`{"job":{"id":"j-1"}}`),
		SubmittedID: "j-1",
		Ref:         provider.Ref{ID: "j-1"},
		StatusKey:   get,
		States: []providertest.StateCase{
			{Name: "waiting", Reply: body(`{"state":"waiting"}`), State: state.Queued},
			{Name: "busy", Reply: body(`{"state":"busy","pct":42}`), State: state.Running},
			{Name: "ok", Reply: body(`{"state":"ok","out":[{"url":"https://cdn.example/a.mp4"}]}`), State: state.Succeeded},
			{Name: "bad", Reply: body(`{"state":"bad","err":{"msg":"refused"}}`), State: state.Failed},
			{Name: "stopped", Reply: body(`{"state":"stopped"}`), State: state.Canceled},
			{Name: "gone", Reply: body(`{"state":"gone"}`), State: state.Expired},
			{Name: "paused", Reply: body(`{"state":"paused"}`), State: state.Unknown},
		},
		NotFound: providertest.Reply{Status: 404, Body: []byte(`{"message":"no such job"}`)},
		Errors: []providertest.ErrorCase{
			{Name: "400", Reply: providertest.Reply{Status: 400, Body: []byte(`{"message":"bad"}`)}, Class: provider.Invalid, Message: "bad"},
			{Name: "503 + Retry-After", Reply: providertest.Reply{Status: 503, Header: http.Header{"Retry-After": {"2"}}}, Class: provider.RateLimited, RetryAfter: 2 * time.Second},
			{Name: "a state saying not found", Reply: body(`{"state":"lost"}`), Class: provider.NotFound},
		},
		BadIDs: []string{"a/b", "a&b=1", ".hidden"},
		Cancels: []providertest.CancelCase{
			{Name: "unfinished", Replies: map[string]providertest.Reply{get: body(`{"state":"busy"}`), cancel: {Status: 202}}, State: state.Unknown, Calls: []string{get, cancel}},
			{Name: "finished is left alone", Replies: map[string]providertest.Reply{get: body(`{"state":"ok"}`)}, State: state.Succeeded, Calls: []string{get}},
		},
		PollAfter: true,
	})
}
