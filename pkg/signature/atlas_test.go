package signature_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/signature"
)

const atlasBody = `{"event_type":"video.task.terminal","session_id":"a1b2c3","status":"OK","payload":{"status":"completed","outputs":["https://cdn.example/v.mp4"]}}`

func atlasVerifier(t testing.TB, srv *jwksServer, c *clock) *signature.AtlasVerifier {
	t.Helper()
	v, err := signature.NewAtlasVerifier(signature.AtlasVerifier{
		JWKSURL: srv.URL + "/api/v1/webhooks/jwks.json", HTTPClient: srv.Client(), Now: c.Now,
	})
	require.NoError(t, err)
	return v
}

// atlasSign signs body at ts with key, named kid ("" sends no key id).
func atlasSign(key ed25519.PrivateKey, kid, ts string, body []byte) http.Header {
	sig := ed25519.Sign(key, []byte(ts+"."+string(body)))
	h := http.Header{}
	h.Set("X-AtlasCloud-Webhook-Timestamp", ts)
	h.Set("X-AtlasCloud-Webhook-Signature-Ed25519", base64.RawURLEncoding.EncodeToString(sig))
	h.Set("X-AtlasCloud-Webhook-Id", "a1b2c3")
	if kid != "" {
		h.Set("X-AtlasCloud-Webhook-Key-Id", kid)
	}
	return h
}

func TestAtlasVerify(t *testing.T) {
	t.Parallel()
	k1 := falKey(0)
	srv := newJWKSServer(t, jwks(jwk("k1", k1.Public().(ed25519.PublicKey))))
	c := newClock(time.Unix(1700000000, 0))
	v := atlasVerifier(t, srv, c)
	body := []byte(atlasBody)
	ts := c.ts()

	require.NoError(t, v.Verify(t.Context(), atlasSign(k1, "k1", ts, body), body))
	require.NoError(t, v.Verify(t.Context(), atlasSign(k1, "", ts, body), body), "no key id: every key is tried")
	require.True(t, v.Verified(t.Context(), atlasSign(k1, "k1", ts, body), body))

	// Other encodings of the same signature, and the legacy header.
	sig := ed25519.Sign(k1, []byte(ts+"."+atlasBody))
	for name, enc := range map[string]string{
		"padded url": base64.URLEncoding.EncodeToString(sig),
		"std":        base64.StdEncoding.EncodeToString(sig),
	} {
		h := atlasSign(k1, "k1", ts, body)
		h.Set("X-AtlasCloud-Webhook-Signature-Ed25519", enc)
		require.NoError(t, v.Verify(t.Context(), h, body), name)
	}
	legacy := atlasSign(k1, "k1", ts, body)
	legacy.Del("X-AtlasCloud-Webhook-Signature-Ed25519")
	legacy.Set("X-AtlasCloud-Webhook-Signature", hex.EncodeToString(sig))
	require.NoError(t, v.Verify(t.Context(), legacy, body), "the legacy header carrying the Ed25519 signature")

	for _, tc := range []struct {
		name string
		h    http.Header
		body string
		want error
	}{
		{"other body", atlasSign(k1, "k1", ts, body), atlasBody + " ", signature.ErrNoMatch},
		{"forged: another key under k1", atlasSign(falKey(100), "k1", ts, body), atlasBody, signature.ErrNoMatch},
		{"stale", atlasSign(k1, "k1", "1699999699", body), atlasBody, signature.ErrTooOld},
		{"future", atlasSign(k1, "k1", "1700000301", body), atlasBody, signature.ErrTooNew},
		{"unsigned", http.Header{"X-Atlascloud-Webhook-Timestamp": {ts}}, atlasBody, signature.ErrMissingHeader},
		{"no timestamp", http.Header{"X-Atlascloud-Webhook-Signature-Ed25519": {base64.RawURLEncoding.EncodeToString(sig)}}, atlasBody, signature.ErrMissingHeader},
		{"short signature", func() http.Header {
			h := atlasSign(k1, "k1", ts, body)
			h.Set("X-AtlasCloud-Webhook-Signature-Ed25519", base64.RawURLEncoding.EncodeToString(sig[:63]))
			return h
		}(), atlasBody, signature.ErrBadSignatureHeader},
		{"legacy HMAC alone", func() http.Header {
			h := atlasSign(k1, "k1", ts, body)
			h.Del("X-AtlasCloud-Webhook-Signature-Ed25519")
			h.Set("X-AtlasCloud-Webhook-Signature", hex.EncodeToString(make([]byte, 32)))
			return h
		}(), atlasBody, signature.ErrBadSignatureHeader},
		{"two timestamps", func() http.Header {
			h := atlasSign(k1, "k1", ts, body)
			h.Add("X-AtlasCloud-Webhook-Timestamp", ts)
			return h
		}(), atlasBody, signature.ErrBadTimestamp},
	} {
		err := v.Verify(t.Context(), tc.h, []byte(tc.body))
		require.ErrorIs(t, err, tc.want, tc.name)
		if errors.Is(tc.want, signature.ErrNoMatch) {
			require.False(t, v.Verified(t.Context(), tc.h, []byte(tc.body)), tc.name)
		}
	}
	require.EqualValues(t, 1, srv.hits.Load(), "within MinRefresh nothing is fetched again")
}

func TestAtlasKeyRotation(t *testing.T) {
	t.Parallel()
	k1, k2 := falKey(0), falKey(50)
	pub := func(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }
	srv := newJWKSServer(t, jwks(jwk("k1", pub(k1))))
	c := newClock(time.Unix(1700000000, 0))
	v := atlasVerifier(t, srv, c)
	body := []byte(atlasBody)
	verify := func(key ed25519.PrivateKey, kid string) error {
		return v.Verify(t.Context(), atlasSign(key, kid, c.ts(), body), body)
	}
	require.NoError(t, verify(k1, "k1"))

	// Atlas Cloud rotates to k2. Within MinRefresh the unknown key id is
	// refused without a fetch; past it, exactly one fetch finds k2.
	srv.serve(http.StatusOK, jwks(jwk("k1", pub(k1)), jwk("k2", pub(k2))))
	c.Advance(30 * time.Second)
	require.ErrorIs(t, verify(k2, "k2"), signature.ErrNoMatch)
	require.EqualValues(t, 1, srv.hits.Load())
	c.Advance(30 * time.Second)
	require.NoError(t, verify(k2, "k2"))
	require.EqualValues(t, 2, srv.hits.Load())
	for range 5 {
		require.NoError(t, verify(k2, "k2"))
		require.NoError(t, verify(k1, "k1"))
		require.ErrorIs(t, verify(k2, "k3"), signature.ErrNoMatch, "an unknown key id")
		require.ErrorIs(t, verify(k2, "k1"), signature.ErrNoMatch, "k2's signature under k1's id")
	}
	require.EqualValues(t, 2, srv.hits.Load(), "a flood of unknown key ids fetches at most once per MinRefresh")

	// A JWKS outage: good keys stay, and past MaxStaleness nothing verifies.
	srv.serve(http.StatusInternalServerError, "")
	c.Advance(time.Minute)
	require.ErrorIs(t, verify(k2, "k9"), signature.ErrNoMatch)
	require.NoError(t, verify(k2, "k2"))
	c.Advance(25 * time.Hour)
	require.ErrorIs(t, verify(k2, "k2"), signature.ErrKeys)
	require.False(t, v.Verified(t.Context(), atlasSign(k2, "k2", c.ts(), body), body), "stale keys are not trusted")
}

func TestAtlasConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]signature.AtlasVerifier{
		"http url":          {JWKSURL: "http://api.atlascloud.ai/api/v1/webhooks/jwks.json"},
		"negative":          {Tolerance: -time.Second},
		"staleness < floor": {MaxStaleness: time.Second, MinRefresh: time.Minute},
	} {
		_, err := signature.NewAtlasVerifier(cfg)
		require.Error(t, err, name)
	}
	v, err := signature.NewAtlasVerifier(signature.AtlasVerifier{})
	require.NoError(t, err)
	require.Equal(t, "https://api.atlascloud.ai/api/v1/webhooks/jwks.json", v.JWKSURL)
	require.Equal(t, 5*time.Minute, v.Tolerance)
	require.Error(t, (&signature.AtlasVerifier{}).Verify(t.Context(), http.Header{}, nil), "not made by NewAtlasVerifier")
}

// FuzzAtlasVerify checks that a delivery passes only when an independent
// Ed25519 check of timestamp + "." + body under the published key does.
func FuzzAtlasVerify(f *testing.F) {
	key := falKey(0)
	now := time.Unix(1700000000, 0)
	f.Add("1700000000", validMarker, "k1", []byte(atlasBody))
	f.Add("1700000000", validMarker, "", []byte(`{}`))
	f.Add("01700000000", validMarker, "k1", []byte(atlasBody))
	f.Add("1700000000", "AAAA", "k2", []byte(atlasBody))
	f.Add("1700000300", validMarker, "k1", []byte(""))
	srv := newJWKSServer(f, jwks(jwk("k1", key.Public().(ed25519.PublicKey))))
	v, err := signature.NewAtlasVerifier(signature.AtlasVerifier{
		JWKSURL: srv.URL + "/jwks.json", HTTPClient: srv.Client(), Now: func() time.Time { return now },
		MinRefresh: time.Hour, MaxStaleness: time.Hour,
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, ts, sig, kid string, body []byte) {
		if sig == validMarker {
			sig = base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, []byte(ts+"."+string(body))))
		}
		h := http.Header{}
		h.Set("X-AtlasCloud-Webhook-Timestamp", ts)
		h.Set("X-AtlasCloud-Webhook-Signature-Ed25519", sig)
		if kid != "" {
			h.Set("X-AtlasCloud-Webhook-Key-Id", kid)
		}
		if v.Verify(t.Context(), h, body) != nil {
			return
		}
		n, err := strconv.ParseInt(ts, 10, 64)
		require.NoError(t, err)
		require.LessOrEqual(t, now.Sub(time.Unix(n, 0)).Abs(), 5*time.Minute)
		raw, err := base64.RawURLEncoding.DecodeString(sig)
		if err != nil {
			raw, err = base64.StdEncoding.DecodeString(sig)
		}
		if err != nil {
			raw, err = base64.URLEncoding.DecodeString(sig)
		}
		if err != nil {
			raw, err = base64.RawStdEncoding.DecodeString(sig)
		}
		require.NoError(t, err)
		require.True(t, ed25519.Verify(key.Public().(ed25519.PublicKey), []byte(ts+"."+string(body)), raw))
		require.Contains(t, []string{"", "k1"}, kid)
	})
}
