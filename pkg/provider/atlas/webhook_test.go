package atlas_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/atlas"
	"github.com/pollux-dev/pollux/pkg/provider/providertest"
	"github.com/pollux-dev/pollux/pkg/state"
)

const jwksPath = "/api/v1/webhooks/jwks.json"

// key returns the Ed25519 key whose seed is the bytes start, start+1, ...
func key(start byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = start + byte(i)
	}
	return ed25519.NewKeyFromSeed(seed)
}

// jwks is a JWKS document of the keys, by kid.
func jwks(keys map[string]ed25519.PrivateKey) providertest.Reply {
	var list []map[string]string
	for kid, k := range keys {
		list = append(list, map[string]string{"kty": "OKP", "crv": "Ed25519", "kid": kid,
			"x": base64.RawURLEncoding.EncodeToString(k.Public().(ed25519.PublicKey))})
	}
	b, _ := json.Marshal(map[string]any{"keys": list})
	return providertest.Reply{Status: 200, Body: b}
}

// sign signs a delivery as Atlas Cloud does: Ed25519 over timestamp.body,
// base64url, with the key id.
func sign(k ed25519.PrivateKey, kid string, at time.Time, body []byte) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	h := http.Header{}
	h.Set("X-AtlasCloud-Webhook-Timestamp", ts)
	h.Set("X-AtlasCloud-Webhook-Signature-Ed25519", base64.RawURLEncoding.EncodeToString(ed25519.Sign(k, []byte(ts+"."+string(body)))))
	h.Set("X-AtlasCloud-Webhook-Key-Id", kid)
	h.Set("X-AtlasCloud-Webhook-Id", predID)
	h.Set("X-AtlasCloud-Webhook-Event", "video.task.terminal")
	return h
}

func webhookAdapter(t *testing.T) (*atlas.Adapter, *providertest.Server, *clock) {
	t.Helper()
	f := providertest.NewTLSServer(t, map[string]providertest.Reply{"GET " + jwksPath: jwks(map[string]ed25519.PrivateKey{"k1": key(0)})})
	a, clk, _ := newAdapter(t, f, `{"jwks_url":"`+f.URL+jwksPath+`"}`, soon)
	return a, f, clk
}

func TestWebhookVerifiedIsApplied(t *testing.T) {
	t.Parallel()
	a, f, clk := webhookAdapter(t)
	for _, tc := range []struct {
		file  string
		state state.State
		check func(*testing.T, provider.Status)
	}{
		{"webhook_completed.json", state.Succeeded, func(t *testing.T, st provider.Status) {
			require.Equal(t, []string{outputURL}, st.Outputs)
			require.Equal(t, completed.Add(14*24*time.Hour), st.OutputsExpireAt)
		}},
		{"webhook_failed.json", state.Failed, func(t *testing.T, st provider.Status) {
			require.Equal(t, "input rejected by content moderation (code 1039)", st.Reason)
		}},
		{"webhook_data_shape.json", state.Succeeded, func(t *testing.T, st provider.Status) {
			require.Equal(t, []string{outputURL}, st.Outputs, "data instead of payload, output as a string")
		}},
	} {
		body := fixture(t, tc.file)
		h := sign(key(0), "k1", clk.Now(), body)
		id, err := a.VerifyWebhook(context.Background(), h, body)
		require.NoError(t, err, tc.file)
		require.True(t, strings.HasPrefix(id, "atlas:"+predID+":"), id)
		st, err := a.ParseWebhook(h, body)
		require.NoError(t, err, tc.file)
		require.Equal(t, predID, st.RemoteID, tc.file)
		require.Equal(t, tc.state, st.State, tc.file)
		tc.check(t, st)
	}
	require.Equal(t, 1, f.Count("GET "+jwksPath), "keys are cached")

	// Read again later (the applier's retry), past the replay window: a
	// delivery accepted once is still applied.
	body := fixture(t, "webhook_completed.json")
	h := sign(key(0), "k1", clk.Now(), body)
	clk.Set(clk.Now().Add(10 * time.Minute))
	st, err := a.ParseWebhook(h, body)
	require.NoError(t, err)
	require.Equal(t, state.Succeeded, st.State)
}

func TestWebhookRotatedKey(t *testing.T) {
	t.Parallel()
	a, f, clk := webhookAdapter(t)
	body := fixture(t, "webhook_completed.json")
	_, err := a.VerifyWebhook(context.Background(), sign(key(0), "k1", clk.Now(), body), body)
	require.NoError(t, err)

	// Atlas Cloud rotates to k2. Past MinRefresh, the unknown key id
	// refreshes the keys once, and the delivery verifies and applies.
	f.Set("GET "+jwksPath, jwks(map[string]ed25519.PrivateKey{"k1": key(0), "k2": key(50)}))
	clk.Set(clk.Now().Add(2 * time.Minute))
	h := sign(key(50), "k2", clk.Now(), body)
	id, err := a.VerifyWebhook(context.Background(), h, body)
	require.NoError(t, err)
	require.Equal(t, "atlas:"+predID+":completed", id)
	st, err := a.ParseWebhook(h, body)
	require.NoError(t, err)
	require.Equal(t, state.Succeeded, st.State)
	require.Equal(t, 2, f.Count("GET "+jwksPath))
}

func TestWebhookForgedOrUnsignedIsAHint(t *testing.T) {
	t.Parallel()
	a, f, clk := webhookAdapter(t)
	body := fixture(t, "webhook_completed.json")
	stale := sign(key(0), "k1", clk.Now().Add(-time.Hour), body)
	unsigned := http.Header{"X-Atlascloud-Webhook-Id": {predID}}
	for name, h := range map[string]http.Header{
		"forged: another key under k1":    sign(key(99), "k1", clk.Now(), body),
		"forged: an unknown key id":       sign(key(99), "k9", clk.Now(), body),
		"unsigned":                        unsigned,
		"a signature over another body":   sign(key(0), "k1", clk.Now(), fixture(t, "webhook_failed.json")),
		"replayed past the window (read)": stale,
	} {
		id, err := a.VerifyWebhook(context.Background(), h, body)
		require.NoError(t, err, name)
		require.True(t, strings.HasPrefix(id, "hint-"), "%s: %s", name, id)
		again, _ := a.VerifyWebhook(context.Background(), h, body)
		require.Equal(t, id, again, "%s: the same delivery has the same id", name)
		if name == "replayed past the window (read)" {
			continue // genuine: what it says is true of the job, and it is read as such
		}
		st, err := a.ParseWebhook(h, body)
		require.NoError(t, err, name)
		require.Equal(t, provider.Status{RemoteID: predID, Observation: state.Observation{State: state.Unknown}}, st,
			"%s: nothing but the job's id: Pollux checks the job now", name)
	}
	require.Equal(t, 1, f.Count("GET "+jwksPath), "forged key ids fetch nothing again within MinRefresh")

	// The JWKS unreachable: a hint too, not a refusal.
	g := providertest.NewTLSServer(t, map[string]providertest.Reply{"GET " + jwksPath: {Status: 503}})
	b, _, _ := newAdapter(t, g, `{"jwks_url":"`+g.URL+jwksPath+`"}`, soon)
	h := sign(key(0), "k1", soon, body)
	id, err := b.VerifyWebhook(context.Background(), h, body)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(id, "hint-"))
	st, err := b.ParseWebhook(h, body)
	require.NoError(t, err)
	require.Equal(t, state.Unknown, st.State)

	// A body that names no prediction is refused.
	for _, bad := range []string{`{"status":"OK"}`, `not json`, `{"session_id":"../x"}`} {
		_, err := a.VerifyWebhook(context.Background(), sign(key(0), "k1", clk.Now(), []byte(bad)), []byte(bad))
		require.ErrorIs(t, err, provider.ErrMalformed, bad)
	}
}

func FuzzReadDelivery(f *testing.F) {
	for _, name := range []string{"webhook_completed.json", "webhook_failed.json", "webhook_data_shape.json"} {
		f.Add(fixture(f, name))
	}
	f.Add([]byte(`{"payload":"x","data":[1],"session_id":7}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		id, err := atlas.ReadDelivery(body)
		if err != nil {
			require.ErrorIs(t, err, provider.ErrMalformed)
			return
		}
		require.NotEmpty(t, id)
		require.NotContains(t, id, "/")
	})
}
