package signature

import "errors"

// Errors callers branch on. Verify wraps them with a short explanation that
// never repeats a header value or a secret; use errors.Is.
//
// A receiver typically answers 400 for ErrMissingHeader, ErrBadID,
// ErrBadTimestamp and ErrBadSignatureHeader, 401 for ErrTooOld, ErrTooNew and
// ErrNoMatch, and 503 for ErrKeys (the sender retries later).
var (
	// ErrMissingHeader: a required header is absent or empty.
	ErrMissingHeader = errors.New("signature: missing header")
	// ErrBadID: the delivery id header (webhook-id, or fal's request or
	// user id) is malformed, too long, or sent more than once.
	ErrBadID = errors.New("signature: malformed id header")
	// ErrBadTimestamp: the timestamp is not a canonical decimal number of
	// Unix seconds, or was sent more than once.
	ErrBadTimestamp = errors.New("signature: malformed timestamp header")
	// ErrTooOld: the timestamp is further in the past than the tolerance.
	ErrTooOld = errors.New("signature: timestamp too old")
	// ErrTooNew: the timestamp is further in the future than the tolerance.
	ErrTooNew = errors.New("signature: timestamp too new")
	// ErrBadSignatureHeader: the signature header is too long, has too many
	// entries, or (fal) is not 64 bytes of hex.
	ErrBadSignatureHeader = errors.New("signature: malformed signature header")
	// ErrNoMatch: no signature matches any secret or key (for fal, also a
	// delivery addressed to another user id).
	ErrNoMatch = errors.New("signature: no matching signature")
	// ErrKeys: fal's public keys could not be had (JWKS unreachable, an
	// error status, garbage, or no usable Ed25519 key), so nothing can be
	// verified. Verification fails closed.
	ErrKeys = errors.New("signature: no usable keys")
)

// Malformed reports whether err says a delivery is not well formed (a
// header missing, malformed or repeated) rather than not authentic: the
// former is a 400, the latter a 401.
func Malformed(err error) bool {
	return errors.Is(err, ErrMissingHeader) || errors.Is(err, ErrBadID) ||
		errors.Is(err, ErrBadTimestamp) || errors.Is(err, ErrBadSignatureHeader)
}
