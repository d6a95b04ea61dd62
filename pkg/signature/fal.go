package signature

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
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
	falHTTPTimeout      = 10 * time.Second
	falMaxStaleness     = 24 * time.Hour
	falMinRefresh       = time.Minute
	maxJWKSBody         = 64 << 10
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

	cache *keyCache // made by NewFalVerifier, shared by copies
}

// NewFalVerifier fills cfg's defaults, validates it, naming the bad field,
// and returns a verifier with an empty key cache. It fetches nothing: the
// first Verify does.
func NewFalVerifier(cfg FalVerifier) (*FalVerifier, error) {
	f := cfg
	if f.JWKSURL == "" {
		f.JWKSURL = falJWKSURL
	}
	if u, err := url.Parse(f.JWKSURL); err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, errors.New("signature: FalVerifier.JWKSURL must be an https URL")
	}
	if f.UserID == "" {
		return nil, errors.New("signature: FalVerifier.UserID is required")
	}
	if err := checkID("FalVerifier.UserID", f.UserID, false); err != nil {
		return nil, fmt.Errorf("signature: FalVerifier.UserID: only printable ASCII without spaces, at most %d bytes", maxIDLen)
	}
	if f.Tolerance < 0 || f.MaxStaleness < 0 || f.MinRefresh < 0 {
		return nil, errors.New("signature: FalVerifier durations must not be negative")
	}
	if f.HTTPClient == nil {
		f.HTTPClient = &http.Client{Timeout: falHTTPTimeout}
	}
	if f.Now == nil {
		f.Now = time.Now
	}
	if f.Tolerance == 0 {
		f.Tolerance = defaultTolerance
	}
	if f.MaxStaleness == 0 {
		f.MaxStaleness = falMaxStaleness
	}
	if f.MinRefresh == 0 {
		f.MinRefresh = falMinRefresh
	}
	if f.MaxStaleness < f.MinRefresh {
		return nil, errors.New("signature: FalVerifier.MaxStaleness is shorter than MinRefresh")
	}
	f.cache = &keyCache{}
	return &f, nil
}

// Verify authenticates a fal delivery from its headers and its raw body,
// exactly as received, and returns its request id. fal sends no per-delivery
// id: deduplicate on request id and status. ctx bounds a JWKS fetch, if one
// is needed. Errors wrap the package's sentinels; ErrKeys means nothing
// could be verified for want of keys.
func (f *FalVerifier) Verify(ctx context.Context, h http.Header, body []byte) (requestID string, err error) {
	if f.cache == nil {
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

	sum := sha256.Sum256(body)
	msg := []byte(rid + "\n" + uid + "\n" + tsRaw + "\n" + hex.EncodeToString(sum[:]))
	set, err := f.keys(ctx, false)
	if err != nil {
		return "", err
	}
	if set.verify(msg, sig) {
		return rid, nil
	}
	// Perhaps fal rotated its keys: refresh, if MinRefresh allows, and retry.
	newer, err := f.keys(ctx, true)
	if err != nil {
		return "", err
	}
	if newer != set && newer.verify(msg, sig) {
		return rid, nil
	}
	return "", fmt.Errorf("%w: no fal key verifies the signature", ErrNoMatch)
}

// keyCache holds the last good key set. A failed fetch never replaces it.
type keyCache struct {
	mu        sync.Mutex
	set       *keySet       // last good set; nil before the first good fetch
	attempted time.Time     // start of the last fetch that counts against MinRefresh
	lastErr   error         // why the last counted fetch failed; nil if it succeeded
	inflight  chan struct{} // closed when the running fetch ends; nil if none runs
}

// keySet is one good JWKS fetch. Its keys are all ed25519.PublicKeySize
// bytes long, so ed25519.Verify cannot panic on them.
type keySet struct {
	keys      []ed25519.PublicKey
	fetchedAt time.Time
}

func (s *keySet) verify(msg, sig []byte) bool {
	for _, k := range s.keys {
		if ed25519.Verify(k, msg, sig) {
			return true
		}
	}
	return false
}

// keys returns the cached key set, fetching the JWKS first when there is no
// set younger than MaxStaleness or when refresh is set, as far as MinRefresh
// allows. Concurrent callers share one fetch. Without a usable set the
// error wraps ErrKeys.
func (f *FalVerifier) keys(ctx context.Context, refresh bool) (*keySet, error) {
	c := f.cache
	fetched := false
	var fetchErr error
	for {
		c.mu.Lock()
		now := f.Now()
		set := c.set
		if set != nil && now.Sub(set.fetchedAt) > f.MaxStaleness {
			set = nil // too old to trust
		}
		want := !fetched && (set == nil || refresh)
		if want && c.inflight != nil {
			wait := c.inflight
			c.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: waiting for the fal JWKS: %w", ErrKeys, ctx.Err())
			}
			continue // look again at what that fetch left
		}
		if want && (c.attempted.IsZero() || now.Sub(c.attempted) >= f.MinRefresh) {
			prev, done := c.attempted, make(chan struct{})
			c.attempted, c.inflight = now, done
			c.mu.Unlock()

			keys, err := f.fetch(ctx)

			c.mu.Lock()
			switch {
			case err == nil:
				c.set, c.lastErr = &keySet{keys: keys, fetchedAt: f.Now()}, nil
			case ctx.Err() != nil:
				// Our caller gave up, which says nothing about the JWKS:
				// do not count it, so a waiter may fetch at once.
				c.attempted = prev
			default:
				c.lastErr = err
			}
			c.inflight = nil
			close(done)
			c.mu.Unlock()
			fetched, fetchErr = true, err
			continue
		}
		lastErr := c.lastErr
		c.mu.Unlock()
		if set != nil {
			return set, nil
		}
		switch {
		case fetchErr != nil:
			return nil, fmt.Errorf("%w: %w", ErrKeys, fetchErr)
		case lastErr != nil:
			return nil, fmt.Errorf("%w: last fetch: %w", ErrKeys, lastErr)
		}
		return nil, fmt.Errorf("%w: fal keys are stale and MinRefresh forbids a fetch yet", ErrKeys)
	}
}

// fetch gets and parses the JWKS.
func (f *FalVerifier) fetch(ctx context.Context) ([]ed25519.PublicKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.JWKSURL, nil)
	if err != nil {
		return nil, fmt.Errorf("fal JWKS request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := f.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch fal JWKS: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch fal JWKS: HTTP %d", resp.StatusCode)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBody+1))
	if err != nil {
		return nil, fmt.Errorf("read fal JWKS: %w", err)
	}
	if len(raw) > maxJWKSBody {
		return nil, fmt.Errorf("read fal JWKS: body larger than %d bytes", maxJWKSBody)
	}
	return parseJWKS(raw)
}

// parseJWKS returns the Ed25519 keys of a JWKS document: entries with kty
// "OKP", crv "Ed25519" and an x of 32 bytes in unpadded base64url. Other
// entries are skipped; a document without any such key is an error.
func parseJWKS(raw []byte) ([]ed25519.PublicKey, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("decode fal JWKS: %w", err)
	}
	var keys []ed25519.PublicKey
	for _, entry := range doc.Keys {
		var k struct {
			Kty string `json:"kty"`
			Crv string `json:"crv"`
			X   string `json:"x"`
		}
		// An entry of another shape is skipped, not fatal to the others.
		if json.Unmarshal(entry, &k) != nil || k.Kty != "OKP" || k.Crv != "Ed25519" {
			continue
		}
		x, err := base64.RawURLEncoding.Strict().DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			continue
		}
		keys = append(keys, ed25519.PublicKey(x))
	}
	if len(keys) == 0 {
		return nil, errors.New("fal JWKS has no usable Ed25519 key")
	}
	return keys, nil
}
