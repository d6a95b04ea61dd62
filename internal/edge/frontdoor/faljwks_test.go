package frontdoor_test

import (
	"crypto/ed25519"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/pkg/signature"
)

// The fal webhooks' JWKS is served to anyone, no token, with the key of
// every configured server secret, current first, so a delivery signed
// under either side of a rotation verifies against it; a Pollux that
// sends no webhooks has none to serve.
func TestFalJWKS(t *testing.T) {
	t.Parallel()
	cur, err := signature.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	prev, err := signature.ParseSecret("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD")
	require.NoError(t, err)
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenAlice + " act name=alice\n"))
	require.NoError(t, err)
	d := setup(t, frontdoor.Config{Tokens: tokens, Webhooks: &frontdoor.Webhooks{Secrets: [][]byte{cur, prev}}})
	r := d.do(t, http.MethodGet, frontdoor.FalJWKSPath, "", nil)
	require.Equal(t, http.StatusOK, r.status, "no token needed: %s", r.raw)
	require.Equal(t, "public, max-age=300", r.header.Get("Cache-Control"))
	want := signature.JWKS(signature.DeriveFalKey(cur).Public().(ed25519.PublicKey), signature.DeriveFalKey(prev).Public().(ed25519.PublicKey))
	require.JSONEq(t, string(want), string(r.raw))

	// What a delivery signed under the current or the previous secret
	// carries verifies against it with the verifier an app uses.
	v, err := signature.NewFalVerifier(signature.FalVerifier{JWKSURL: d.url + frontdoor.FalJWKSPath, UserID: "alice"})
	require.NoError(t, err)
	for _, s := range [][]byte{cur, prev} {
		h := http.Header{}
		signature.SignFal(h, signature.DeriveFalKey(s), "r1", "alice", time.Now(), []byte(`{}`))
		_, err := v.Verify(t.Context(), h, []byte(`{}`))
		require.NoError(t, err)
	}
	r = d.do(t, http.MethodPost, frontdoor.FalJWKSPath, `{}`, nil)
	require.Equal(t, http.StatusMethodNotAllowed, r.status, "%s", r.raw)

	none := setup(t, frontdoor.Config{Tokens: tokens})
	r = none.do(t, http.MethodGet, frontdoor.FalJWKSPath, "", nil)
	requireError(t, r, http.StatusNotFound, frontdoor.CodeNotFound, "")
}
