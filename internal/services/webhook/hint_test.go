package webhook_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/webhook"
	"github.com/pollux-dev/pollux/internal/testkit/stack"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/atlas"
	"github.com/pollux-dev/pollux/pkg/provider/generic"
	"github.com/pollux-dev/pollux/pkg/signature"
	"github.com/pollux-dev/pollux/pkg/state"
)

// openAILike is a generic route whose provider signs its id-only events
// with Standard Webhooks and takes a webhook URL per job.
const openAILike = `{
  "base_url": "https://provider.invalid/v1",
  "submit": {"path": "/videos", "model_field": "model", "id_path": "id"},
  "status": {"path": "/videos/{id}", "state_path": "status"},
  "states": {"queued": "queued", "in_progress": "running", "completed": "succeeded", "failed": "failed"},
  "callback": {"signature": "standard_webhooks", "id_path": "data.id", "url_field": "webhook_url"}
}`

const whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// Verified deliveries that name a job but not its state, and Atlas Cloud
// deliveries that cannot be verified, are hints: the job's check is due
// now and nothing else changes. A forged Standard Webhooks delivery is
// refused; a verified Atlas Cloud one is applied.
func TestDeliveriesThatNameOnlyTheJobAreHints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stack.New(t, stack.Config{})
	js, res, owner := st.JS, st.Res, st.Jobs

	// Atlas Cloud's JWKS, with the key k1.
	k1 := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	keys, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "OKP", "crv": "Ed25519", "kid": "k1",
		"x": base64.RawURLEncoding.EncodeToString(k1.Public().(ed25519.PublicKey))}}})
	jwksSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(keys) }))
	defer jwksSrv.Close()

	gen, err := generic.New(provider.Config{Route: "oai", Kind: generic.Kind, Token: "t", WebhookSecret: whsec, Options: json.RawMessage(openAILike)})
	require.NoError(t, err)
	at, err := atlas.New(provider.Config{Route: "atlas", Kind: atlas.Kind, Token: "t", HTTPClient: jwksSrv.Client(),
		Options: json.RawMessage(`{"jwks_url":"` + jwksSrv.URL + `/jwks.json"}`)})
	require.NoError(t, err)
	routes := map[string]*route.Route{}
	for name, a := range map[string]provider.Adapter{"oai": gen, "atlas": at} {
		rt, err := route.New(name, a, config.Route{WebhookURL: "https://hooks.example/webhooks/" + name}, 1)
		require.NoError(t, err)
		require.NotNil(t, rt.Webhooks, name)
		require.Nil(t, rt.Callbacks, name)
		routes[name] = rt
	}

	later := time.Now().Add(time.Hour).UTC()
	track(t, owner, &state.Job{ID: "job-oai", Route: "oai", RemoteID: "video_1", State: state.Running, WebhookExpected: true, NextCheckAt: later})
	track(t, owner, &state.Job{ID: "job-atlas", Route: "atlas", RemoteID: "pred1", State: state.Running, WebhookExpected: true, NextCheckAt: later})
	track(t, owner, &state.Job{ID: "job-atlas-2", Route: "atlas", RemoteID: "pred2", State: state.Running, WebhookExpected: true, NextCheckAt: later})
	revOAI, revAtlas := revision(t, res, "job-oai"), revision(t, res, "job-atlas")

	svc, err := webhook.New(webhook.Config{Routes: routes}, js, events.Default, res, owner.Webhooks())
	require.NoError(t, err)
	hs := httptest.NewServer(svc.Handler())
	defer hs.Close()
	post := func(path string, h http.Header, body string) int {
		req, err := http.NewRequest(http.MethodPost, hs.URL+path, bytes.NewReader([]byte(body)))
		require.NoError(t, err)
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}

	// A signed video.completed that carries only the id.
	secret, err := signature.ParseSecret(whsec)
	require.NoError(t, err)
	event := `{"id":"evt_1","object":"event","type":"video.completed","data":{"id":"video_1"}}`
	sw := http.Header{"Webhook-Id": {"wh_1"}, "Webhook-Timestamp": {strconv.FormatInt(time.Now().Unix(), 10)}}
	sw.Set("Webhook-Signature", "v1,"+base64.StdEncoding.EncodeToString(make([]byte, 32)))
	require.Equal(t, http.StatusUnauthorized, post("/webhooks/oai?job=job-oai", sw, event), "forged: refused")
	sw.Set("Webhook-Signature", signature.Sign(secret, "wh_1", time.Now(), []byte(event)))
	require.Equal(t, http.StatusOK, post("/webhooks/oai?job=job-oai", sw, event))

	// An unsigned Atlas Cloud delivery claiming success: a hint.
	claim := `{"event_type":"video.task.terminal","session_id":"pred1","status":"OK","payload":{"status":"completed","outputs":["https://x/v.mp4"]}}`
	require.Equal(t, http.StatusOK, post("/webhooks/atlas?job=job-atlas", http.Header{}, claim))

	// A signed one: applied.
	signed := `{"event_type":"video.task.terminal","session_id":"pred2","status":"OK","payload":{"status":"completed","outputs":["https://x/v2.mp4"]}}`
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	ah := http.Header{"X-Atlascloud-Webhook-Timestamp": {ts}, "X-Atlascloud-Webhook-Key-Id": {"k1"},
		"X-Atlascloud-Webhook-Signature-Ed25519": {base64.RawURLEncoding.EncodeToString(ed25519.Sign(k1, []byte(ts+"."+signed)))}}
	require.Equal(t, http.StatusOK, post("/webhooks/atlas?job=job-atlas-2", ah, signed))

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error)
	ln := listenLocal(t)
	go func() { done <- svc.Run(cctx, ln) }()
	for route, id := range map[string]string{"oai": "job-oai", "atlas": "job-atlas"} {
		require.Eventually(t, func() bool {
			v, err := owner.Check(ctx, route, id)
			return err == nil && v.Check != nil && !v.Check.Due.After(time.Now())
		}, 10*time.Second, 20*time.Millisecond, "%s: the check is brought forward: due now", id)
		cur, err := owner.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, state.Running, cur.State, "%s: a hint alone never moves a job", id)
	}
	require.Equal(t, revOAI, revision(t, res, "job-oai"), "nor writes its record")
	require.Equal(t, revAtlas, revision(t, res, "job-atlas"))
	require.Eventually(t, func() bool {
		cur, err := owner.Get(ctx, "job-atlas-2")
		return err == nil && cur.State == state.Succeeded
	}, 10*time.Second, 20*time.Millisecond, "a verified Atlas Cloud delivery is applied")
	cur, err := owner.Get(ctx, "job-atlas-2")
	require.NoError(t, err)
	require.Equal(t, []string{"https://x/v2.mp4"}, cur.Outputs)
	cancel()
	require.NoError(t, <-done)
}

// A provider whose webhook endpoint is set once for the account (OpenAI's
// project webhooks) calls without naming the job: its delivery is routed
// by the remote id in its body, through the remote index, and is a hint
// like any id-only one. A delivery about a remote job Pollux does not know
// (another application's, in the same project) is answered 200 and
// ignored, so the provider does not retry it for days.
func TestAProjectWideWebhookIsRoutedByItsRemoteID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stack.New(t, stack.Config{})
	js, res, owner := st.JS, st.Res, st.Jobs
	projectWide := `{
  "base_url": "https://provider.invalid/v1",
  "submit": {"path": "/videos", "model_field": "model", "id_path": "id"},
  "status": {"path": "/videos/{id}", "state_path": "status"},
  "states": {"queued": "queued", "in_progress": "running", "completed": "succeeded", "failed": "failed"},
  "callback": {"signature": "standard_webhooks", "id_path": "data.id"}
}`
	gen, err := generic.New(provider.Config{Route: "oai", Kind: generic.Kind, Token: "t", WebhookSecret: whsec, Options: json.RawMessage(projectWide)})
	require.NoError(t, err)
	require.True(t, gen.Info().WebhooksByRemoteID)
	rt, err := route.New("oai", gen, config.Route{WebhookURL: "https://hooks.example/webhooks/oai"}, 1)
	require.NoError(t, err)

	later := time.Now().Add(time.Hour).UTC()
	track(t, owner, &state.Job{ID: "job-1", Route: "oai", RemoteID: "video_9", State: state.Running, WebhookExpected: true, NextCheckAt: later})
	require.NoError(t, owner.Intake().IndexRemote(ctx, "oai", "video_9", "job-1"))
	got, err := owner.Webhooks().ByRemote(ctx, "oai", "video_9")
	require.NoError(t, err)
	require.Equal(t, "job-1", got)
	_, err = owner.Webhooks().ByRemote(ctx, "other", "video_9")
	require.ErrorIs(t, err, state.ErrNotFound, "per route")

	svc, err := webhook.New(webhook.Config{Routes: map[string]*route.Route{"oai": rt}}, js, events.Default, res, owner.Webhooks())
	require.NoError(t, err)
	hs := httptest.NewServer(svc.Handler())
	defer hs.Close()
	secret, err := signature.ParseSecret(whsec)
	require.NoError(t, err)
	post := func(id, body string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, hs.URL+"/webhooks/oai", bytes.NewReader([]byte(body)))
		require.NoError(t, err)
		req.Header.Set("Webhook-Id", id)
		req.Header.Set("Webhook-Timestamp", strconv.FormatInt(time.Now().Unix(), 10))
		req.Header.Set("Webhook-Signature", signature.Sign(secret, id, time.Now(), []byte(body)))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	status, body := post("wh_other", `{"id":"evt_2","object":"event","type":"video.completed","data":{"id":"video_someone_elses"}}`)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"ok":true,"ignored":true}`, body)
	status, _ = post("wh_9", `{"id":"evt_9","object":"event","type":"video.completed","data":{"id":"video_9"}}`)
	require.Equal(t, http.StatusOK, status)

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error)
	ln := listenLocal(t)
	go func() { done <- svc.Run(cctx, ln) }()
	require.Eventually(t, func() bool {
		v, err := owner.Check(ctx, "oai", "job-1")
		return err == nil && v.Check != nil && !v.Check.Due.After(time.Now())
	}, 10*time.Second, 20*time.Millisecond, "routed by its remote id: the job's check is due now")
	cancel()
	require.NoError(t, <-done)
}
