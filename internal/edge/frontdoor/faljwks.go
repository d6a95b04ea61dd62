package frontdoor

import (
	"crypto/ed25519"
	"net/http"

	"github.com/pollux-dev/pollux/pkg/signature"
)

// FalJWKSPath is where the front door publishes the public keys the fal
// face's webhooks are signed with, as a JWKS (fal publishes its own at
// https://rest.fal.ai/.well-known/jwks.json): an app that verifies fal
// webhooks points its verifier here instead. It is served to anyone, with
// no token: it is public key material, and a verifier fetches it without
// credentials.
const FalJWKSPath = "/fal/.well-known/jwks.json"

// falJWKSMaxAge is how long a client may cache the JWKS: a rotation lists
// the new key well before it signs (docs/faces.md), and a verifier that
// meets an unknown signature fetches again anyway.
const falJWKSMaxAge = "public, max-age=300"

// falJWKS is the JWKS of Webhooks' server secrets, current first: the key
// each derives (signature.DeriveFalKey), so a delivery signed under any
// secret still configured verifies. Nil without Webhooks.
func falJWKS(w *Webhooks) []byte {
	if w == nil {
		return nil
	}
	keys := make([]ed25519.PublicKey, 0, len(w.Secrets))
	for _, s := range w.Secrets {
		keys = append(keys, signature.DeriveFalKey(s).Public().(ed25519.PublicKey))
	}
	return signature.JWKS(keys...)
}

// serveFalJWKS answers GET FalJWKSPath: the JWKS, or 404 from a Pollux
// that sends no webhooks of apps' own.
func (s *Server) serveFalJWKS(w http.ResponseWriter, _ *http.Request) *apiError {
	if s.falJWKS == nil {
		return fail(http.StatusNotFound, CodeNotFound, "", "this Pollux sends no fal webhooks (its configuration sets no notify.submissions): it has no keys to publish")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", falJWKSMaxAge)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(s.falJWKS)
	return nil
}
