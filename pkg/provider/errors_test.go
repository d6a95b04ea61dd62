package provider_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/signature"
)

// A verifier's refusal is malformed (400) when a header is missing or
// unreadable, and not authentic (401) otherwise; the cause is kept.
func TestVerifyError(t *testing.T) {
	t.Parallel()
	for _, malformed := range []error{signature.ErrMissingHeader, signature.ErrBadID, signature.ErrBadTimestamp, signature.ErrBadSignatureHeader} {
		err := provider.VerifyError(malformed)
		require.ErrorIs(t, err, provider.ErrMalformed)
		require.NotErrorIs(t, err, provider.ErrSignature)
		require.ErrorIs(t, err, malformed)
	}
	forged := errors.New("no signature matches")
	err := provider.VerifyError(forged)
	require.ErrorIs(t, err, provider.ErrSignature)
	require.NotErrorIs(t, err, provider.ErrMalformed)
	require.ErrorIs(t, err, forged)
}
