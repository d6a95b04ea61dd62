package fal_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/fal"
	"github.com/pollux-dev/pollux/pkg/state"
)

const userID = "user-123"

// signingKey is deterministic: seed bytes 0x00..0x1f, as in webhooks.md §3.
var signingKey = func() ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i)
	}
	return ed25519.NewKeyFromSeed(seed)
}()

// webhookAdapter returns an adapter whose JWKS is served by a fake with
// signingKey, or with status when it is not 200.
func webhookAdapter(t *testing.T, jwksStatus int) *fal.Adapter {
	t.Helper()
	pub := signingKey.Public().(ed25519.PublicKey)
	jwks, err := json.Marshal(map[string]any{"keys": []map[string]string{
		{"kty": "OKP", "crv": "Ed25519", "kid": "k1", "x": base64.RawURLEncoding.EncodeToString(pub)},
	}})
	require.NoError(t, err)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(jwksStatus)
		_, _ = w.Write(jwks)
	}))
	t.Cleanup(srv.Close)
	opts, err := json.Marshal(map[string]string{"user_id": userID, "jwks_url": srv.URL + "/.well-known/jwks.json"})
	require.NoError(t, err)
	a, err := fal.NewAdapter(provider.Config{Route: "f", Kind: fal.Kind, Token: testToken, HTTPClient: srv.Client(), Options: opts})
	require.NoError(t, err)
	return a
}

// signed returns fal's webhook headers for body, signed with key.
func signed(key ed25519.PrivateKey, rid, uid string, ts time.Time, body []byte) http.Header {
	sum := sha256.Sum256(body)
	tsText := strconv.FormatInt(ts.Unix(), 10)
	msg := rid + "\n" + uid + "\n" + tsText + "\n" + hex.EncodeToString(sum[:])
	h := http.Header{}
	h.Set("X-Fal-Webhook-Request-Id", rid)
	h.Set("X-Fal-Webhook-User-Id", uid)
	h.Set("X-Fal-Webhook-Timestamp", tsText)
	h.Set("X-Fal-Webhook-Signature", hex.EncodeToString(ed25519.Sign(key, []byte(msg))))
	return h
}

func TestWebhookVerifyAndParse(t *testing.T) {
	t.Parallel()
	a := webhookAdapter(t, 200)
	tests := []struct {
		file     string
		delivery string
		state    state.State
		check    func(*testing.T, provider.Status)
	}{
		{"webhook_ok.json", requestID + ":OK", state.Succeeded, func(t *testing.T, st provider.Status) {
			require.Equal(t, []string{"https://v3.fal.media/files/kangaroo/9Y2n4tYh2yLm1K0eSMQpA_output.mp4"}, st.Outputs)
		}},
		{"webhook_error.json", requestID + ":ERROR", state.Failed, func(t *testing.T, st provider.Status) {
			require.Equal(t, "Invalid status code: 422: body.prompt: field required", st.Reason)
		}},
		{"webhook_payload_error.json", requestID + ":OK", state.Unknown, func(t *testing.T, st provider.Status) {
			require.Empty(t, st.Outputs, "a poll fetches the result")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			body, err := os.ReadFile("testdata/" + tt.file)
			require.NoError(t, err)
			h := signed(signingKey, requestID, userID, time.Now(), body)
			id, err := a.VerifyWebhook(context.Background(), h, body)
			require.NoError(t, err)
			require.Equal(t, tt.delivery, id)
			st, err := a.ParseWebhook(h, body)
			require.NoError(t, err)
			require.Equal(t, requestID, st.RemoteID)
			require.Equal(t, tt.state, st.State)
			tt.check(t, st)
		})
	}
}

func TestWebhookRefusals(t *testing.T) {
	t.Parallel()
	a := webhookAdapter(t, 200)
	body, err := os.ReadFile("testdata/webhook_ok.json")
	require.NoError(t, err)
	_, otherKey, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)

	tampered := append([]byte{}, body...)
	tampered[len(tampered)-3] ^= 1
	tests := []struct {
		name   string
		header http.Header
		body   []byte
		want   error
	}{
		{"tampered body", signed(signingKey, requestID, userID, time.Now(), body), tampered, provider.ErrSignature},
		{"another key", signed(otherKey, requestID, userID, time.Now(), body), body, provider.ErrSignature},
		{"another user", signed(signingKey, requestID, "user-999", time.Now(), body), body, provider.ErrSignature},
		{"stale", signed(signingKey, requestID, userID, time.Now().Add(-10*time.Minute), body), body, provider.ErrSignature},
		{"no signature", func() http.Header {
			h := signed(signingKey, requestID, userID, time.Now(), body)
			h.Del("X-Fal-Webhook-Signature")
			return h
		}(), body, provider.ErrMalformed},
		{"body names another request", signed(signingKey, "other-request", userID, time.Now(), body), body, provider.ErrMalformed},
	}
	for _, tt := range tests {
		_, err := a.VerifyWebhook(context.Background(), tt.header, tt.body)
		require.ErrorIs(t, err, tt.want, tt.name)
	}
}

func TestWebhookKeysUnavailableIsNotTheSendersFault(t *testing.T) {
	t.Parallel()
	a := webhookAdapter(t, 503)
	body, err := os.ReadFile("testdata/webhook_ok.json")
	require.NoError(t, err)
	_, err = a.VerifyWebhook(context.Background(), signed(signingKey, requestID, userID, time.Now(), body), body)
	require.Error(t, err)
	require.False(t, errors.Is(err, provider.ErrSignature) || errors.Is(err, provider.ErrMalformed),
		"the receiver answers 503 and fal retries: %v", err)
}

func TestWebhookWithoutUserIDIsRefused(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(*http.Request) (int, http.Header, []byte) { return 500, nil, nil })
	_, err := newAdapter(t, f, "").VerifyWebhook(context.Background(), http.Header{}, []byte(`{}`))
	require.Error(t, err)
}

func TestParseWebhookRefusesGarbage(t *testing.T) {
	t.Parallel()
	a := webhookAdapter(t, 200)
	for _, b := range []string{`not json`, `{}`, `{"request_id":"../x","status":"OK"}`, `[]`} {
		_, err := a.ParseWebhook(nil, []byte(b))
		require.ErrorIs(t, err, provider.ErrMalformed, b)
	}
	st, err := a.ParseWebhook(nil, []byte(`{"request_id":"r1","status":"SOMETHING_NEW"}`))
	require.NoError(t, err)
	require.Equal(t, state.Unknown, st.State, "unmapped is never terminal")
}

func FuzzParseWebhook(f *testing.F) {
	for _, name := range []string{"webhook_ok.json", "webhook_error.json", "webhook_payload_error.json"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	a, err := fal.NewAdapter(provider.Config{Route: "f", Token: "t"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		st, err := a.ParseWebhook(nil, body)
		if err != nil {
			return
		}
		require.NotEmpty(t, st.RemoteID)
		if st.State.Terminal() {
			require.Contains(t, []string{"OK", "ERROR"}, st.Raw)
		}
		require.LessOrEqual(t, len(st.Outputs), 100)
	})
}
