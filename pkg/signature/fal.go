package signature

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// fal header names (http.Header canonicalises them).
const (
	falHeaderRequestID = "X-Fal-Webhook-Request-Id"
	falHeaderUserID    = "X-Fal-Webhook-User-Id"
	falHeaderTimestamp = "X-Fal-Webhook-Timestamp"
	falHeaderSignature = "X-Fal-Webhook-Signature"
)

const (
	falJWKSURL          = "https://rest.fal.ai/.well-known/jwks.json"
	falSignatureHexSize = 2 * ed25519.SignatureSize
)

// FalVerifier checks fal.ai deliveries, which are signed with Ed25519 over
// request_id + "\n" + user_id + "\n" + timestamp + "\n" + hex(sha256(body))
// with keys that fal publishes as a JWKS. It caches the keys, refreshing
// them when they are older than MaxStaleness or when no cached key verifies
// a delivery, never more than once per MinRefresh, with one fetch shared by
// concurrent callers.
//
// The fields are the configuration: fill them, pass them to NewFalVerifier,
// and use the verifier it returns, which is safe for concurrent use (do not
// change its fields afterwards).
type FalVerifier struct {
	// JWKSURL is where fal publishes its public keys; it must be an https
	// URL (default "https://rest.fal.ai/.well-known/jwks.json").
	JWKSURL string
	// HTTPClient fetches the JWKS (default: a client with a 10 s timeout).
	HTTPClient *http.Client
	// UserID is the fal user id of our account; deliveries for any other
	// user id are rejected. Required.
	UserID string
	// Tolerance is how far the timestamp may be from Now, in either
	// direction (default 5 min). Exactly Tolerance passes.
	Tolerance time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// MaxStaleness is the age past which cached keys are refreshed before
	// use, and no longer trusted if the refresh fails (default 24 h). It
	// must be at least MinRefresh.
	MaxStaleness time.Duration
	// MinRefresh is the least time between two JWKS fetches, whatever
	// their cause, failed ones included (default 1 min).
	MinRefresh time.Duration

	keys *jwks // made by NewFalVerifier, shared by copies
}

// NewFalVerifier fills cfg's defaults, validates it, naming the bad field,
// and returns a verifier with an empty key cache. It fetches nothing: the
// first Verify does.
func NewFalVerifier(cfg FalVerifier) (*FalVerifier, error) {
	f := cfg
	if f.UserID == "" {
		return nil, errors.New("signature: FalVerifier.UserID is required")
	}
	if err := checkID("FalVerifier.UserID", f.UserID, false); err != nil {
		return nil, fmt.Errorf("signature: FalVerifier.UserID: only printable ASCII without spaces, at most %d bytes", maxIDLen)
	}
	keys, err := keyConfig{verifier: "FalVerifier", name: "fal", defaultURL: falJWKSURL, url: &f.JWKSURL, client: &f.HTTPClient,
		tolerance: &f.Tolerance, now: &f.Now, maxStaleness: &f.MaxStaleness, minRefresh: &f.MinRefresh}.build()
	if err != nil {
		return nil, err
	}
	f.keys = keys
	return &f, nil
}

// Verify authenticates a fal delivery from its headers and its raw body,
// exactly as received, and returns its request id. fal sends no per-delivery
// id: deduplicate on request id and status. ctx bounds a JWKS fetch, if one
// is needed. Errors wrap the package's sentinels; ErrKeys means nothing
// could be verified for want of keys.
func (f *FalVerifier) Verify(ctx context.Context, h http.Header, body []byte) (requestID string, err error) {
	if f.keys == nil {
		return "", errors.New("signature: FalVerifier not made by NewFalVerifier")
	}
	rid, err := oneValue(h, falHeaderRequestID, ErrBadID)
	if err != nil {
		return "", err
	}
	if err := checkID(falHeaderRequestID, rid, false); err != nil {
		return "", err
	}
	uid, err := oneValue(h, falHeaderUserID, ErrBadID)
	if err != nil {
		return "", err
	}
	tsRaw, err := oneValue(h, falHeaderTimestamp, ErrBadTimestamp)
	if err != nil {
		return "", err
	}
	ts, err := parseTimestamp(falHeaderTimestamp, tsRaw)
	if err != nil {
		return "", err
	}
	sigHex, err := oneValue(h, falHeaderSignature, ErrBadSignatureHeader)
	if err != nil {
		return "", err
	}
	sig, err := hex.DecodeString(sigHex)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return "", fmt.Errorf("%w: %s is not %d hex digits", ErrBadSignatureHeader, falHeaderSignature, falSignatureHexSize)
	}
	if uid != f.UserID {
		return "", fmt.Errorf("%w: delivery is for another fal user id", ErrNoMatch)
	}
	if err := checkWindow(f.Now(), ts, f.Tolerance); err != nil {
		return "", err
	}

	msg := falMessage(rid, uid, tsRaw, body)
	set, err := f.keys.get(ctx, false)
	if err != nil {
		return "", err
	}
	if set.verifyAny(msg, sig) {
		return rid, nil
	}
	// Perhaps fal rotated its keys: refresh, if MinRefresh allows, and retry.
	newer, err := f.keys.get(ctx, true)
	if err != nil {
		return "", err
	}
	if newer != set && newer.verifyAny(msg, sig) {
		return rid, nil
	}
	return "", fmt.Errorf("%w: no fal key verifies the signature", ErrNoMatch)
}

// falMessage is what fal signs: request_id + "\n" + user_id + "\n" +
// timestamp + "\n" + hex(sha256(body)), the header strings as sent. It
// is the one definition both FalVerifier and SignFal use.
func falMessage(requestID, userID, timestamp string, body []byte) []byte {
	sum := sha256.Sum256(body)
	return []byte(requestID + "\n" + userID + "\n" + timestamp + "\n" + hex.EncodeToString(sum[:]))
}

// SignFal signs a delivery as fal signs its webhooks, for a sender of
// fal-shaped webhooks (Pollux's fal face): it sets h's
// X-Fal-Webhook-Request-Id, -User-Id, -Timestamp (now, Unix seconds) and
// -Signature (the hex Ed25519 signature by key of falMessage), which a
// FalVerifier whose JWKS lists key's public key accepts. requestID and
// userID must be what FalVerifier accepts (1 to 256 bytes of printable
// ASCII without spaces).
func SignFal(h http.Header, key ed25519.PrivateKey, requestID, userID string, now time.Time, body []byte) {
	ts := strconv.FormatInt(now.Unix(), 10)
	h.Set(falHeaderRequestID, requestID)
	h.Set(falHeaderUserID, userID)
	h.Set(falHeaderTimestamp, ts)
	h.Set(falHeaderSignature, hex.EncodeToString(ed25519.Sign(key, falMessage(requestID, userID, ts, body))))
}
