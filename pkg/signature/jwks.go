package signature

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Key cache defaults.
const (
	jwksHTTPTimeout  = 10 * time.Second
	jwksMaxStaleness = 24 * time.Hour
	jwksMinRefresh   = time.Minute
	maxJWKSBody      = 64 << 10
)

// jwks is a provider's published Ed25519 keys, fetched lazily and cached:
// the key cache FalVerifier and AtlasVerifier share. The last good set is
// kept until a newer good one replaces it; it is refreshed when older than
// maxStaleness, or when the caller asks (an unknown key id, or no key that
// verifies), never more than once per minRefresh, with one fetch shared by
// concurrent callers. A failed fetch never replaces good keys, and a set
// older than maxStaleness is not trusted.
type jwks struct {
	name         string // the provider, for error text
	url          string
	client       *http.Client
	now          func() time.Time
	maxStaleness time.Duration
	minRefresh   time.Duration

	mu        sync.Mutex
	set       *keySet       // last good set; nil before the first good fetch
	attempted time.Time     // start of the last fetch that counts against minRefresh
	lastErr   error         // why the last counted fetch failed; nil if it succeeded
	inflight  chan struct{} // closed when the running fetch ends; nil if none runs
}

// keyConfig points at the configuration fields an Ed25519 verifier shares
// with the others, so build can fill their defaults and check them in one
// place.
type keyConfig struct {
	verifier, name, defaultURL string
	url                        *string
	client                     **http.Client
	tolerance                  *time.Duration
	now                        *func() time.Time
	maxStaleness, minRefresh   *time.Duration
}

// build fills the defaults, checks the values, naming the bad field, and
// returns an empty key cache.
func (c keyConfig) build() (*jwks, error) {
	if *c.url == "" {
		*c.url = c.defaultURL
	}
	if u, err := url.Parse(*c.url); err != nil || u.Host == "" || u.Scheme != "https" && (u.Scheme != "http" || !loopback(u.Hostname())) {
		return nil, fmt.Errorf("signature: %s.JWKSURL must be an https URL (http only to a loopback host)", c.verifier)
	}
	if *c.tolerance < 0 || *c.maxStaleness < 0 || *c.minRefresh < 0 {
		return nil, fmt.Errorf("signature: %s durations must not be negative", c.verifier)
	}
	if *c.client == nil {
		*c.client = &http.Client{Timeout: jwksHTTPTimeout}
	}
	if *c.now == nil {
		*c.now = time.Now
	}
	*c.tolerance = cmp.Or(*c.tolerance, defaultTolerance)
	*c.maxStaleness = cmp.Or(*c.maxStaleness, jwksMaxStaleness)
	*c.minRefresh = cmp.Or(*c.minRefresh, jwksMinRefresh)
	if *c.maxStaleness < *c.minRefresh {
		return nil, fmt.Errorf("signature: %s.MaxStaleness is shorter than MinRefresh", c.verifier)
	}
	return &jwks{name: c.name, url: *c.url, client: *c.client, now: *c.now,
		maxStaleness: *c.maxStaleness, minRefresh: *c.minRefresh}, nil
}

// keySet is one good JWKS fetch. Its keys are all ed25519.PublicKeySize
// bytes long, so ed25519.Verify cannot panic on them.
type keySet struct {
	keys      []ed25519.PublicKey
	byKID     map[string]ed25519.PublicKey // the keys that have a kid
	fetchedAt time.Time
}

// verifyAny reports whether any key of the set verifies sig over msg.
func (s *keySet) verifyAny(msg, sig []byte) bool {
	for _, k := range s.keys {
		if ed25519.Verify(k, msg, sig) {
			return true
		}
	}
	return false
}

// get returns the cached key set, fetching the JWKS first when there is no
// set younger than maxStaleness or when refresh is set, as far as
// minRefresh allows. Concurrent callers share one fetch. Without a usable
// set the error wraps ErrKeys.
func (j *jwks) get(ctx context.Context, refresh bool) (*keySet, error) {
	fetched := false
	var fetchErr error
	for {
		j.mu.Lock()
		now := j.now()
		set := j.set
		if set != nil && now.Sub(set.fetchedAt) > j.maxStaleness {
			set = nil // too old to trust
		}
		want := !fetched && (set == nil || refresh)
		if want && j.inflight != nil {
			wait := j.inflight
			j.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: waiting for the %s JWKS: %w", ErrKeys, j.name, ctx.Err())
			}
			continue // look again at what that fetch left
		}
		if want && (j.attempted.IsZero() || now.Sub(j.attempted) >= j.minRefresh) {
			prev, done := j.attempted, make(chan struct{})
			j.attempted, j.inflight = now, done
			j.mu.Unlock()
			got, err := j.fetch(ctx)
			j.mu.Lock()
			switch {
			case err == nil:
				got.fetchedAt = j.now()
				j.set, j.lastErr = got, nil
			case ctx.Err() != nil:
				// Our caller gave up, which says nothing about the JWKS:
				// do not count it, so a waiter may fetch at once.
				j.attempted = prev
			default:
				j.lastErr = err
			}
			j.inflight = nil
			close(done)
			j.mu.Unlock()
			fetched, fetchErr = true, err
			continue
		}
		lastErr := j.lastErr
		j.mu.Unlock()
		if set != nil {
			return set, nil
		}
		switch {
		case fetchErr != nil:
			return nil, fmt.Errorf("%w: %w", ErrKeys, fetchErr)
		case lastErr != nil:
			return nil, fmt.Errorf("%w: last fetch: %w", ErrKeys, lastErr)
		}
		return nil, fmt.Errorf("%w: %s keys are stale and MinRefresh forbids a fetch yet", ErrKeys, j.name)
	}
}

// fetch gets and parses the JWKS.
func (j *jwks) fetch(ctx context.Context) (*keySet, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.url, nil)
	if err != nil {
		return nil, fmt.Errorf("%s JWKS request: %w", j.name, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := j.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s JWKS: %w", j.name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch %s JWKS: HTTP %d", j.name, resp.StatusCode)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBody+1))
	if err != nil {
		return nil, fmt.Errorf("read %s JWKS: %w", j.name, err)
	}
	if len(raw) > maxJWKSBody {
		return nil, fmt.Errorf("read %s JWKS: body larger than %d bytes", j.name, maxJWKSBody)
	}
	set, err := parseJWKS(raw)
	if err != nil {
		return nil, fmt.Errorf("%s %w", j.name, err)
	}
	return set, nil
}

// parseJWKS returns the Ed25519 keys of a JWKS document: entries with kty
// "OKP", crv "Ed25519" and an x of 32 bytes in unpadded base64url, indexed
// by kid where they have one (the first entry of a kid wins). Other
// entries are skipped; a document without any such key is an error.
func parseJWKS(raw []byte) (*keySet, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("decode JWKS: %w", err)
	}
	set := &keySet{byKID: map[string]ed25519.PublicKey{}}
	for _, entry := range doc.Keys {
		var k jwk
		// An entry of another shape is skipped, not fatal to the others.
		if json.Unmarshal(entry, &k) != nil || k.Kty != "OKP" || k.Crv != "Ed25519" {
			continue
		}
		x, err := base64.RawURLEncoding.Strict().DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			continue
		}
		set.keys = append(set.keys, ed25519.PublicKey(x))
		if _, dup := set.byKID[k.Kid]; k.Kid != "" && !dup {
			set.byKID[k.Kid] = ed25519.PublicKey(x)
		}
	}
	if len(set.keys) == 0 {
		return nil, errors.New("JWKS has no usable Ed25519 key")
	}
	return set, nil
}

// loopback reports whether host is localhost or a loopback address: a
// JWKS there (a Pollux on the same machine) may be fetched over http.
func loopback(host string) bool {
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap().IsLoopback()
	}
	return strings.EqualFold(host, "localhost")
}

// jwk is one Ed25519 entry of a JWKS document (RFC 8037).
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	X   string `json:"x"`
}

// KeyID is the kid JWKS gives key: "ed25519-" and the first 12 bytes of
// its SHA-256, in unpadded base64url.
func KeyID(key ed25519.PublicKey) string {
	sum := sha256.Sum256(key)
	return "ed25519-" + base64.RawURLEncoding.EncodeToString(sum[:12])
}

// JWKS is the JWKS document that publishes keys, in order, as parseJWKS
// (and so FalVerifier) reads one: {"keys": [{"kty": "OKP", "crv":
// "Ed25519", "kid", "use": "sig", "alg": "EdDSA", "x"}]}, x being the key
// in unpadded base64url. Keys not ed25519.PublicKeySize bytes long are
// left out.
func JWKS(keys ...ed25519.PublicKey) []byte {
	doc := struct {
		Keys []jwk `json:"keys"`
	}{Keys: []jwk{}}
	for _, k := range keys {
		if len(k) != ed25519.PublicKeySize {
			continue
		}
		doc.Keys = append(doc.Keys, jwk{Kty: "OKP", Crv: "Ed25519", Kid: KeyID(k), Use: "sig", Alg: "EdDSA",
			X: base64.RawURLEncoding.EncodeToString(k)})
	}
	b, _ := json.Marshal(doc) // strings only: cannot fail
	return b
}
