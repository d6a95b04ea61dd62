package signature

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Atlas Cloud header names (http.Header canonicalises them).
const (
	atlasHeaderTimestamp = "X-Atlascloud-Webhook-Timestamp"
	atlasHeaderSignature = "X-Atlascloud-Webhook-Signature-Ed25519"
	atlasHeaderLegacy    = "X-Atlascloud-Webhook-Signature"
	atlasHeaderKeyID     = "X-Atlascloud-Webhook-Key-Id"
)

const atlasJWKSURL = "https://api.atlascloud.ai/api/v1/webhooks/jwks.json"

// AtlasVerifier checks Atlas Cloud deliveries, which are signed with
// Ed25519 over X-AtlasCloud-Webhook-Timestamp + "." + body, the signature
// in X-AtlasCloud-Webhook-Signature-Ed25519 (base64url, 64 bytes) and the
// key named by X-AtlasCloud-Webhook-Key-Id in the JWKS Atlas Cloud
// publishes. These details come from third-party integrations that agree
// with each other and cite Atlas Cloud's webhook page, whose signing
// section could not be read [3p-consistent]; so the verifier is lenient
// where they may vary and strict where it matters:
//
//   - the signature may be base64url or standard base64, padded or not,
//     and, when X-AtlasCloud-Webhook-Signature-Ed25519 is absent, is read
//     from the legacy X-AtlasCloud-Webhook-Signature (said to carry the
//     Ed25519 signature once HMAC is retired) in any of those encodings or
//     hex; whatever the encoding, it must decode to 64 bytes;
//   - a key id names the one key to try; an unknown key id refreshes the
//     JWKS (at most once per MinRefresh) before the delivery is refused;
//     without a key id every cached key is tried, as FalVerifier does;
//   - the timestamp is canonical decimal Unix seconds within Tolerance.
//
// The legacy hex HMAC alone cannot be verified (its secret is not
// documented) and is refused. Fill the fields, pass them to
// NewAtlasVerifier, and use the verifier it returns, which is safe for
// concurrent use (do not change its fields afterwards).
type AtlasVerifier struct {
	// JWKSURL is where Atlas Cloud publishes its public keys; it must be
	// an https URL (default
	// "https://api.atlascloud.ai/api/v1/webhooks/jwks.json").
	JWKSURL string
	// HTTPClient fetches the JWKS (default: a client with a 10 s timeout).
	HTTPClient *http.Client
	// Tolerance is how far the timestamp may be from Now, in either
	// direction (default 5 min, the documented replay window).
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
	keys       *jwks // made by NewAtlasVerifier, shared by copies
}

// NewAtlasVerifier fills cfg's defaults, validates it, naming the bad
// field, and returns a verifier with an empty key cache. It fetches
// nothing: the first Verify does.
func NewAtlasVerifier(cfg AtlasVerifier) (*AtlasVerifier, error) {
	a := cfg
	keys, err := keyConfig{verifier: "AtlasVerifier", name: "Atlas Cloud", defaultURL: atlasJWKSURL, url: &a.JWKSURL, client: &a.HTTPClient,
		tolerance: &a.Tolerance, now: &a.Now, maxStaleness: &a.MaxStaleness, minRefresh: &a.MinRefresh}.build()
	if err != nil {
		return nil, err
	}
	a.keys = keys
	return &a, nil
}

// atlasDelivery is what the headers of a delivery say.
type atlasDelivery struct {
	ts  time.Time
	kid string
	sig []byte
	msg []byte
}

// read parses a delivery's signing headers.
func (a *AtlasVerifier) read(h http.Header, body []byte) (atlasDelivery, error) {
	tsRaw, err := oneValue(h, atlasHeaderTimestamp, ErrBadTimestamp)
	if err != nil {
		return atlasDelivery{}, err
	}
	ts, err := parseTimestamp(atlasHeaderTimestamp, tsRaw)
	if err != nil {
		return atlasDelivery{}, err
	}
	name := atlasHeaderSignature
	if len(h.Values(name)) == 0 {
		name = atlasHeaderLegacy
	}
	sigText, err := oneValue(h, name, ErrBadSignatureHeader)
	if err != nil {
		return atlasDelivery{}, err
	}
	sig := decodeSignature(sigText, name == atlasHeaderLegacy)
	if sig == nil {
		return atlasDelivery{}, fmt.Errorf("%w: %s is not a %d-byte signature", ErrBadSignatureHeader, name, ed25519.SignatureSize)
	}
	var kid string
	if len(h.Values(atlasHeaderKeyID)) > 0 {
		if kid, err = oneValue(h, atlasHeaderKeyID, ErrBadID); err != nil {
			return atlasDelivery{}, err
		}
		if err := checkID(atlasHeaderKeyID, kid, false); err != nil {
			return atlasDelivery{}, err
		}
	}
	msg := make([]byte, 0, len(tsRaw)+1+len(body))
	msg = append(append(append(msg, tsRaw...), '.'), body...)
	return atlasDelivery{ts: ts, kid: kid, sig: sig, msg: msg}, nil
}

// maxSignatureText bounds a signature header before decoding.
const maxSignatureText = 256

// decodeSignature reads a 64-byte signature written in base64url or
// standard base64, padded or not, or (hexToo) in hex; nil when it is none
// of these.
func decodeSignature(s string, hexToo bool) []byte {
	if len(s) > maxSignatureText {
		return nil
	}
	for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.StdEncoding, base64.RawStdEncoding} {
		if b, err := enc.Strict().DecodeString(s); err == nil && len(b) == ed25519.SignatureSize {
			return b
		}
	}
	if hexToo {
		if b, err := hex.DecodeString(s); err == nil && len(b) == ed25519.SignatureSize {
			return b
		}
	}
	return nil
}

// verifiedBy reports whether set verifies d: with the key its id names, or
// any key when it names none; knownKey is false for a key id the set lacks.
func (d atlasDelivery) verifiedBy(set *keySet) (ok, knownKey bool) {
	if d.kid == "" {
		return set.verifyAny(d.msg, d.sig), true
	}
	k, found := set.byKID[d.kid]
	if !found {
		return false, false
	}
	return ed25519.Verify(k, d.msg, d.sig), true
}

// Verify authenticates an Atlas Cloud delivery from its headers and its
// raw body, exactly as received. ctx bounds a JWKS fetch, if one is
// needed. Errors wrap the package's sentinels; ErrKeys means nothing could
// be verified for want of keys. Atlas Cloud's delivery id header is not
// signed: take the job's id from the verified body.
func (a *AtlasVerifier) Verify(ctx context.Context, h http.Header, body []byte) error {
	if a.keys == nil {
		return errors.New("signature: AtlasVerifier not made by NewAtlasVerifier")
	}
	d, err := a.read(h, body)
	if err != nil {
		return err
	}
	if err := checkWindow(a.Now(), d.ts, a.Tolerance); err != nil {
		return err
	}
	set, err := a.keys.get(ctx, false)
	if err != nil {
		return err
	}
	if ok, _ := d.verifiedBy(set); ok {
		return nil
	}
	// An unknown key id, or no key that verifies: perhaps Atlas Cloud
	// rotated its keys. Refresh, if MinRefresh allows, and retry.
	newer, err := a.keys.get(ctx, true)
	if err != nil {
		return err
	}
	if newer != set {
		if ok, _ := d.verifiedBy(newer); ok {
			return nil
		}
	}
	if _, known := d.verifiedBy(newer); !known {
		return fmt.Errorf("%w: no Atlas Cloud key has the delivery's key id", ErrNoMatch)
	}
	return fmt.Errorf("%w: no Atlas Cloud key verifies the signature", ErrNoMatch)
}

// Verified reports whether the cached keys verify the delivery, whatever
// its age: for a delivery Verify accepted when it arrived, read again
// later, perhaps by another process. It fetches the keys only when none
// are cached or they are stale (within MinRefresh, ctx bounding the
// fetch), never for an unknown key id, so it may say false after a
// rotation.
func (a *AtlasVerifier) Verified(ctx context.Context, h http.Header, body []byte) bool {
	if a.keys == nil {
		return false
	}
	d, err := a.read(h, body)
	if err != nil {
		return false
	}
	set, err := a.keys.get(ctx, false)
	if err != nil {
		return false
	}
	ok, _ := d.verifiedBy(set)
	return ok
}
