package signature_test

import (
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/signature"
)

// SignFal signs the fal vector as fal does: the same headers and the same
// signature, byte for byte (Ed25519 is deterministic), so the message it
// signs is the one FalVerifier checks.
func TestSignFalVector(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	signature.SignFal(h, vectorKey, falRID, falUID, time.Unix(1700000000, 0), []byte(falBody))
	require.Equal(t, falHeaders(falRID, falUID, falTS, falSig), h)
}

// A key derived from a server secret is the same in every process, differs
// from another secret's, and differs from the Standard Webhooks secret
// derived from the same server secret.
func TestDeriveFalKey(t *testing.T) {
	t.Parallel()
	a, err := signature.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	b, err := signature.ParseSecret("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD")
	require.NoError(t, err)
	require.Equal(t, signature.DeriveFalKey(a), signature.DeriveFalKey(a))
	require.NotEqual(t, signature.DeriveFalKey(a), signature.DeriveFalKey(b))
	require.NotEqual(t, []byte(signature.DeriveFalKey(a).Seed()), signature.DeriveSecret(a, ""))
}

// What SignFal signs, FalVerifier accepts against the JWKS that JWKS
// writes (served over http on loopback, as a local Pollux serves it), for
// either key of a rotation; a key no longer published, another user id or
// a changed body is refused.
func TestSignFalVerifiesAgainstJWKS(t *testing.T) {
	t.Parallel()
	oldKey, newKey, gone := falKey(1), falKey(2), falKey(3)
	doc := signature.JWKS(newKey.Public().(ed25519.PublicKey), oldKey.Public().(ed25519.PublicKey))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(doc) }))
	t.Cleanup(srv.Close)
	v, err := signature.NewFalVerifier(signature.FalVerifier{JWKSURL: srv.URL + "/fal/.well-known/jwks.json", UserID: "app"})
	require.NoError(t, err)
	body := []byte(`{"request_id":"r","status":"OK","payload":{"files":[]}}`)
	for _, k := range []ed25519.PrivateKey{oldKey, newKey} {
		h := http.Header{}
		signature.SignFal(h, k, "r", "app", time.Now(), body)
		rid, err := v.Verify(t.Context(), h, body)
		require.NoError(t, err)
		require.Equal(t, "r", rid)
		_, err = v.Verify(t.Context(), h, append([]byte(" "), body...))
		require.ErrorIs(t, err, signature.ErrNoMatch)
	}
	h := http.Header{}
	signature.SignFal(h, gone, "r", "app", time.Now(), body)
	_, err = v.Verify(t.Context(), h, body)
	require.ErrorIs(t, err, signature.ErrNoMatch)
	h = http.Header{}
	signature.SignFal(h, newKey, "r", "other-app", time.Now(), body)
	_, err = v.Verify(t.Context(), h, body)
	require.ErrorIs(t, err, signature.ErrNoMatch)
}

// JWKS writes fal's key shape, with a kid of each key, and leaves out a
// key of the wrong size.
func TestJWKS(t *testing.T) {
	t.Parallel()
	var doc struct {
		Keys []map[string]string `json:"keys"`
	}
	require.NoError(t, json.Unmarshal(signature.JWKS(vectorKey.Public().(ed25519.PublicKey), ed25519.PublicKey{1, 2}), &doc))
	require.Len(t, doc.Keys, 1)
	require.Equal(t, map[string]string{"kty": "OKP", "crv": "Ed25519", "use": "sig", "alg": "EdDSA", "x": falX,
		"kid": signature.KeyID(vectorKey.Public().(ed25519.PublicKey))}, doc.Keys[0])
	require.JSONEq(t, `{"keys":[]}`, string(signature.JWKS()))
}

// A JWKS URL is https, or http to a loopback host only.
func TestFalJWKSURLOnLoopback(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"http://127.0.0.1:8080/fal/.well-known/jwks.json", "http://localhost/j", "http://[::1]:9/j"} {
		_, err := signature.NewFalVerifier(signature.FalVerifier{UserID: "app", JWKSURL: u})
		require.NoError(t, err, u)
	}
	for _, u := range []string{"http://10.0.0.1/j", "http://pollux.example/j", "http://localhost.example/j"} {
		_, err := signature.NewFalVerifier(signature.FalVerifier{UserID: "app", JWKSURL: u})
		require.Error(t, err, u)
	}
}
