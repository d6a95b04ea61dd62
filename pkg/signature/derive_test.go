package signature_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/signature"
)

func TestDeriveSecret(t *testing.T) {
	server, err := signature.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	other, err := signature.ParseSecret("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD")
	require.NoError(t, err)

	a := signature.DeriveSecret(server, "app-a")
	require.Len(t, a, 32)
	require.Equal(t, a, signature.DeriveSecret(server, "app-a"), "the same caller's secret is stable")
	require.False(t, bytes.Equal(a, signature.DeriveSecret(server, "app-b")), "each caller has its own secret")
	require.False(t, bytes.Equal(a, signature.DeriveSecret(other, "app-a")), "a new server secret gives a new caller secret")
	require.False(t, bytes.Equal(signature.DeriveSecret(server, "ab"), signature.DeriveSecret(server, "a\x00b")))

	// The formatted secret reads back, and verifies what it signed.
	shown := signature.FormatSecret(a)
	key, err := signature.ParseSecret(shown)
	require.NoError(t, err)
	require.Equal(t, a, key)
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"id":"x"}`)
	v, err := signature.NewVerifier(shown)
	require.NoError(t, err)
	v.Now = func() time.Time { return now }
	h := map[string][]string{
		"Webhook-Id":        {"msg_1"},
		"Webhook-Timestamp": {"1700000000"},
		"Webhook-Signature": {signature.Sign(signature.DeriveSecret(other, "app-a"), "msg_1", now, body) + " " + signature.Sign(a, "msg_1", now, body)},
	}
	_, err = v.Verify(h, body)
	require.NoError(t, err, "a delivery signed under the old and the new server secret verifies with either caller secret")
}
