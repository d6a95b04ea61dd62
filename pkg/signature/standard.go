package signature

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks header names (http.Header canonicalises them).
const (
	headerID        = "webhook-id"
	headerTimestamp = "webhook-timestamp"
	headerSignature = "webhook-signature"
)

const (
	secretPrefix          = "whsec_"
	minSecretLen          = 24
	maxSecretLen          = 64
	maxSignatureHeaderLen = 4 << 10
	defaultTolerance      = 5 * time.Minute
	defaultMaxSignatures  = 8
)

// ParseSecret decodes a Standard Webhooks secret: "whsec_" followed by
// canonical, padded standard base64 of 24 to 64 bytes. The error says what is
// wrong without repeating the secret.
func ParseSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return nil, errors.New("signature: secret does not start with " + secretPrefix)
	}
	if b64 == "" {
		return nil, errors.New("signature: secret is empty after " + secretPrefix)
	}
	key, err := base64.StdEncoding.Strict().DecodeString(b64)
	// The decoder skips '\r' and '\n'; re-encoding catches those too.
	if err != nil || base64.StdEncoding.EncodeToString(key) != b64 {
		return nil, errors.New("signature: secret is not canonical padded standard base64")
	}
	if len(key) < minSecretLen || len(key) > maxSecretLen {
		return nil, fmt.Errorf("signature: secret decodes to %d bytes, want %d to %d",
			len(key), minSecretLen, maxSecretLen)
	}
	return key, nil
}

// Sign returns the Standard Webhooks v1 signature "v1,<base64 HMAC-SHA256>"
// of id + "." + ts (Unix seconds) + "." + body under secret, as a producer
// would send it in webhook-signature. It does not check its inputs.
func Sign(secret []byte, id string, ts time.Time, body []byte) string {
	return "v1," + sign(secret, id, strconv.FormatInt(ts.Unix(), 10), body)
}

func sign(secret []byte, id, ts string, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	_, _ = io.WriteString(mac, id)
	_, _ = io.WriteString(mac, ".")
	_, _ = io.WriteString(mac, ts)
	_, _ = io.WriteString(mac, ".")
	_, _ = mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Verifier checks Standard Webhooks v1 (HMAC-SHA256) deliveries, as sent by
// Replicate, OpenAI and Gemini. It is safe for concurrent use; do not change
// its fields while Verify runs.
type Verifier struct {
	// Secrets are the decoded secrets (see ParseSecret), each 24 to 64
	// bytes; a signature by any of them is accepted, so old and new secrets
	// can overlap during a rotation. At least one is required.
	Secrets [][]byte
	// Tolerance is how far webhook-timestamp may be from Now, in either
	// direction (default 5 min). Exactly Tolerance passes.
	Tolerance time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// MaxSignatures caps the entries of webhook-signature, all versions and
	// all lines counted (default 8). More is ErrBadSignatureHeader.
	MaxSignatures int
}

// NewVerifier returns a Verifier for the given "whsec_" secrets (see
// ParseSecret) with default settings. At least one secret is required.
func NewVerifier(secrets ...string) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("signature: no secrets")
	}
	v := &Verifier{Secrets: make([][]byte, 0, len(secrets))}
	for i, s := range secrets {
		key, err := ParseSecret(s)
		if err != nil {
			return nil, fmt.Errorf("secret %d: %w", i, err)
		}
		v.Secrets = append(v.Secrets, key)
	}
	return v, nil
}

// Verify authenticates a delivery from its headers and its raw body, exactly
// as received, and returns its webhook-id, the deduplication key (the same on
// every retry). Errors wrap the package's sentinels, except for a Verifier
// misconfiguration, which fails every call.
func (v *Verifier) Verify(h http.Header, body []byte) (id string, err error) {
	if err := v.check(); err != nil {
		return "", err
	}
	id, err = oneValue(h, headerID, ErrBadID)
	if err != nil {
		return "", err
	}
	if err := checkID(headerID, id, true); err != nil {
		return "", err
	}
	tsRaw, err := oneValue(h, headerTimestamp, ErrBadTimestamp)
	if err != nil {
		return "", err
	}
	ts, err := parseTimestamp(headerTimestamp, tsRaw)
	if err != nil {
		return "", err
	}
	sigs, err := parseSignatureHeader(h.Values(headerSignature), cmp.Or(v.MaxSignatures, defaultMaxSignatures))
	if err != nil {
		return "", err
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	if err := checkWindow(now(), ts, cmp.Or(v.Tolerance, defaultTolerance)); err != nil {
		return "", err
	}
	if len(sigs) == 0 {
		return "", fmt.Errorf("%w: no v1 signature", ErrNoMatch)
	}
	for _, secret := range v.Secrets {
		want := []byte(sign(secret, id, tsRaw, body))
		for _, sig := range sigs {
			if hmac.Equal([]byte(sig), want) {
				return id, nil
			}
		}
	}
	return "", ErrNoMatch
}

// check rejects a configuration that would verify nothing or too much (an
// empty key is the empty-secret bug of standard-webhooks v0.0.1).
func (v *Verifier) check() error {
	if len(v.Secrets) == 0 {
		return errors.New("signature: Verifier has no secrets")
	}
	for i, s := range v.Secrets {
		if len(s) < minSecretLen || len(s) > maxSecretLen {
			return fmt.Errorf("signature: Verifier.Secrets[%d] is %d bytes, want %d to %d",
				i, len(s), minSecretLen, maxSecretLen)
		}
	}
	if v.Tolerance < 0 {
		return errors.New("signature: Verifier.Tolerance is negative")
	}
	if v.MaxSignatures < 0 {
		return errors.New("signature: Verifier.MaxSignatures is negative")
	}
	return nil
}

// parseSignatureHeader returns the signatures of the v1 entries of the
// webhook-signature lines. Entries are separated by single spaces (empty
// entries from repeated spaces are skipped); an entry is "<version>,<sig>"
// and entries of other versions, or without a comma, are ignored. All lines
// count: together they may hold at most 4 KiB and maxEntries entries. No
// entry at all is ErrMissingHeader. The returned signatures are not decoded:
// Verify compares them with the canonical base64 text, so anything else
// (base64url, missing padding, a trailing ",x") simply does not match.
func parseSignatureHeader(lines []string, maxEntries int) ([]string, error) {
	size := 0
	for _, l := range lines {
		size += len(l) + 1
	}
	if size-1 > maxSignatureHeaderLen {
		return nil, fmt.Errorf("%w: %s is longer than %d bytes", ErrBadSignatureHeader, headerSignature, maxSignatureHeaderLen)
	}
	var sigs []string
	n := 0
	for _, l := range lines {
		for entry := range strings.SplitSeq(l, " ") {
			if entry == "" {
				continue
			}
			if n++; n > maxEntries {
				return nil, fmt.Errorf("%w: %s has more than %d entries", ErrBadSignatureHeader, headerSignature, maxEntries)
			}
			if sig, ok := strings.CutPrefix(entry, "v1,"); ok {
				sigs = append(sigs, sig)
			}
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: %s", ErrMissingHeader, headerSignature)
	}
	return sigs, nil
}
