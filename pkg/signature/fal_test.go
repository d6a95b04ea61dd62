package signature_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/signature"
)

// The fal vector of webhooks.md §3 (generated locally, not official).
const (
	falX     = "A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg"
	falRID   = "123e4567-e89b-12d3-a456-426614174000"
	falUID   = "user-123"
	falTS    = "1700000000"
	falBody  = `{"request_id":"123e4567-e89b-12d3-a456-426614174000","status":"OK","payload":{}}`
	falSig   = "7151da23966831bbca2ed33cb67ccfaf327aebc30810b479063c4b4c2a44028f889230c772c5ff948b6f8e2e95afeff278bfc93685653cd6b128a13b543ad704"
	falKID   = "k1"
	falMinRf = time.Minute
)

// falKey returns the key whose seed is the bytes start, start+1, ...
func falKey(start byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = start + byte(i)
	}
	return ed25519.NewKeyFromSeed(seed)
}

var vectorKey = falKey(0)

// jwk is one JWKS entry.
func jwk(kid string, pub ed25519.PublicKey) map[string]string {
	return map[string]string{"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": base64.RawURLEncoding.EncodeToString(pub)}
}

func jwks(keys ...map[string]string) string {
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// jwksServer is a fake fal JWKS endpoint that counts its requests.
type jwksServer struct {
	*httptest.Server
	hits atomic.Int32

	mu     sync.Mutex
	status int
	body   string
	gate   chan struct{} // when set, requests wait for it to close
}

func newJWKSServer(t testing.TB, body string) *jwksServer {
	s := &jwksServer{status: http.StatusOK, body: body}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		status, body, gate := s.status, s.body, s.gate
		s.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) serve(status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, body
}

// clock is a settable test clock.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}
func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// ts is the clock's time as a fal timestamp header.
func (c *clock) ts() string { return strconv.FormatInt(c.Now().Unix(), 10) }

func falNow(t *testing.T) time.Time { return unix(t, falTS) }

func falVerifier(t testing.TB, srv *jwksServer, c *clock) *signature.FalVerifier {
	t.Helper()
	f, err := signature.NewFalVerifier(signature.FalVerifier{
		JWKSURL:    srv.URL + "/.well-known/jwks.json",
		HTTPClient: srv.Client(),
		UserID:     falUID,
		Now:        c.Now,
	})
	require.NoError(t, err)
	return f
}

func falHeaders(rid, uid, ts, sig string) http.Header {
	h := http.Header{}
	for name, val := range map[string]string{
		"X-Fal-Webhook-Request-Id": rid, "X-Fal-Webhook-User-Id": uid,
		"X-Fal-Webhook-Timestamp": ts, "X-Fal-Webhook-Signature": sig,
	} {
		if val != "" {
			h.Set(name, val)
		}
	}
	return h
}

// falMessage is fal's signed message, built independently of the package.
func falMessage(rid, uid, ts string, body []byte) []byte {
	sum := sha256.Sum256(body)
	return []byte(rid + "\n" + uid + "\n" + ts + "\n" + hex.EncodeToString(sum[:]))
}

// falSign signs a delivery for falUID at the given time with key.
func falSign(key ed25519.PrivateKey, rid, ts string, body []byte) http.Header {
	sig := ed25519.Sign(key, falMessage(rid, falUID, ts, body))
	return falHeaders(rid, falUID, ts, hex.EncodeToString(sig))
}

func TestFalVector(t *testing.T) {
	t.Parallel()
	require.Equal(t, falX, base64.RawURLEncoding.EncodeToString(vectorKey.Public().(ed25519.PublicKey)))
	require.Equal(t, falSig, hex.EncodeToString(ed25519.Sign(vectorKey, falMessage(falRID, falUID, falTS, []byte(falBody)))))

	srv := newJWKSServer(t, `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"`+falX+`"}]}`)
	f := falVerifier(t, srv, newClock(falNow(t)))
	rid, err := f.Verify(t.Context(), falHeaders(falRID, falUID, falTS, falSig), []byte(falBody))
	require.NoError(t, err)
	require.Equal(t, falRID, rid)
	// Upper-case hex is the same signature.
	_, err = f.Verify(t.Context(), falHeaders(falRID, falUID, falTS, strings.ToUpper(falSig)), []byte(falBody))
	require.NoError(t, err)
	require.EqualValues(t, 1, srv.hits.Load(), "keys are cached")
}

func TestFalRejects(t *testing.T) {
	t.Parallel()
	srv := newJWKSServer(t, jwks(jwk(falKID, vectorKey.Public().(ed25519.PublicKey))))
	c := newClock(falNow(t))
	f := falVerifier(t, srv, c)
	body := []byte(falBody)
	other := falKey(100)
	flip := func(s string, i int) string {
		b := []byte(s)
		b[i] ^= 0x01
		return string(b)
	}

	for _, tc := range []struct {
		name string
		h    http.Header
		body string
		want error
	}{
		{"wrong user id", falHeaders(falRID, "user-456", falTS, hex.EncodeToString(ed25519.Sign(vectorKey, falMessage(falRID, "user-456", falTS, body)))), falBody, signature.ErrNoMatch},
		{"other key", falSign(other, falRID, falTS, body), falBody, signature.ErrNoMatch},
		{"other body", falHeaders(falRID, falUID, falTS, falSig), falBody + " ", signature.ErrNoMatch},
		{"other request id", falHeaders("123e4567-e89b-12d3-a456-426614174001", falUID, falTS, falSig), falBody, signature.ErrNoMatch},
		{"stale", falSign(vectorKey, falRID, "1699999699", body), falBody, signature.ErrTooOld},
		{"future", falSign(vectorKey, falRID, "1700000301", body), falBody, signature.ErrTooNew},
		{"leading zero ts", falHeaders(falRID, falUID, "0"+falTS, falSig), falBody, signature.ErrBadTimestamp},
		{"signed ts", falHeaders(falRID, falUID, "+"+falTS, falSig), falBody, signature.ErrBadTimestamp},
		{"short hex", falHeaders(falRID, falUID, falTS, falSig[:126]), falBody, signature.ErrBadSignatureHeader},
		{"long hex", falHeaders(falRID, falUID, falTS, falSig+"00"), falBody, signature.ErrBadSignatureHeader},
		{"odd hex", falHeaders(falRID, falUID, falTS, falSig[:127]), falBody, signature.ErrBadSignatureHeader},
		{"non-hex", falHeaders(falRID, falUID, falTS, "zz"+falSig[2:]), falBody, signature.ErrBadSignatureHeader},
		{"base64 sig", falHeaders(falRID, falUID, falTS, base64.StdEncoding.EncodeToString(make([]byte, 64))), falBody, signature.ErrBadSignatureHeader},
		{"bad request id", falHeaders("a b", falUID, falTS, falSig), falBody, signature.ErrBadID},
		{"no request id", falHeaders("", falUID, falTS, falSig), falBody, signature.ErrMissingHeader},
		{"no user id", falHeaders(falRID, "", falTS, falSig), falBody, signature.ErrMissingHeader},
		{"no timestamp", falHeaders(falRID, falUID, "", falSig), falBody, signature.ErrMissingHeader},
		{"no signature", falHeaders(falRID, falUID, falTS, ""), falBody, signature.ErrMissingHeader},
	} {
		_, err := f.Verify(t.Context(), tc.h, []byte(tc.body))
		require.ErrorIs(t, err, tc.want, tc.name)
	}

	// Flipping any bit of the signature, body or request id fails.
	raw, err := hex.DecodeString(falSig)
	require.NoError(t, err)
	for i := range raw {
		sig := append([]byte(nil), raw...)
		sig[i] ^= 0x01
		_, err := f.Verify(t.Context(), falHeaders(falRID, falUID, falTS, hex.EncodeToString(sig)), body)
		require.ErrorIs(t, err, signature.ErrNoMatch, "signature byte %d", i)
	}
	for i := range len(falBody) {
		_, err := f.Verify(t.Context(), falHeaders(falRID, falUID, falTS, falSig), []byte(flip(falBody, i)))
		require.ErrorIs(t, err, signature.ErrNoMatch, "body byte %d", i)
	}
	for i := range len(falRID) {
		_, err := f.Verify(t.Context(), falHeaders(flip(falRID, i), falUID, falTS, falSig), body)
		require.ErrorIs(t, err, signature.ErrNoMatch, "request id byte %d", i)
	}
	for i := range len(falTS) {
		_, err := f.Verify(t.Context(), falHeaders(falRID, falUID, flip(falTS, i), falSig), body)
		require.Error(t, err, "timestamp byte %d", i)
	}

	// ±300 s passes.
	_, err = f.Verify(t.Context(), falSign(vectorKey, falRID, "1699999700", body), body)
	require.NoError(t, err)
	_, err = f.Verify(t.Context(), falSign(vectorKey, falRID, "1700000300", body), body)
	require.NoError(t, err)

	// Duplicate header lines.
	for name, want := range map[string]error{
		"X-Fal-Webhook-Request-Id": signature.ErrBadID,
		"X-Fal-Webhook-User-Id":    signature.ErrBadID,
		"X-Fal-Webhook-Timestamp":  signature.ErrBadTimestamp,
		"X-Fal-Webhook-Signature":  signature.ErrBadSignatureHeader,
	} {
		h := falHeaders(falRID, falUID, falTS, falSig)
		h.Add(name, h.Get(name))
		_, err := f.Verify(t.Context(), h, body)
		require.ErrorIs(t, err, want, name)
	}
	// A rejected delivery never needs a second fetch while MinRefresh runs.
	require.EqualValues(t, 1, srv.hits.Load())
}

func TestFalConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]signature.FalVerifier{
		"no user id":        {},
		"user id with \\n":  {UserID: "a\nb"},
		"http url":          {UserID: falUID, JWKSURL: "http://rest.fal.ai/.well-known/jwks.json"},
		"not a url":         {UserID: falUID, JWKSURL: "://"},
		"negative":          {UserID: falUID, Tolerance: -time.Second},
		"staleness < floor": {UserID: falUID, MaxStaleness: time.Second, MinRefresh: time.Minute},
	} {
		_, err := signature.NewFalVerifier(cfg)
		require.Error(t, err, name)
	}
	f, err := signature.NewFalVerifier(signature.FalVerifier{UserID: falUID})
	require.NoError(t, err)
	require.Equal(t, "https://rest.fal.ai/.well-known/jwks.json", f.JWKSURL)
	require.Equal(t, 10*time.Second, f.HTTPClient.Timeout)
	require.Equal(t, 5*time.Minute, f.Tolerance)
	require.Equal(t, 24*time.Hour, f.MaxStaleness)
	require.Equal(t, time.Minute, f.MinRefresh)
	require.NotNil(t, f.Now)

	// A FalVerifier not made by NewFalVerifier fails closed.
	_, err = (&signature.FalVerifier{UserID: falUID}).Verify(t.Context(), falHeaders(falRID, falUID, falTS, falSig), []byte(falBody))
	require.Error(t, err)
}

func TestFalJWKSFailures(t *testing.T) {
	t.Parallel()
	good := jwks(jwk(falKID, vectorKey.Public().(ed25519.PublicKey)))
	for _, tc := range []struct {
		name   string
		status int
		body   string
	}{
		{"500", http.StatusInternalServerError, good},
		{"404", http.StatusNotFound, ""},
		{"garbage", http.StatusOK, "<html>oops</html>"},
		{"no keys", http.StatusOK, `{"keys":[]}`},
		{"only unusable keys", http.StatusOK, jwks(map[string]string{"kty": "RSA", "n": "abc", "e": "AQAB"})},
		{"too large", http.StatusOK, `{"pad":"` + strings.Repeat("a", 64<<10) + `",` + good[1:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status := tc.status
			srv := newJWKSServer(t, tc.body)
			srv.serve(status, tc.body)
			c := newClock(falNow(t))
			f := falVerifier(t, srv, c)
			body := []byte(falBody)

			// Cold cache: fail closed.
			_, err := f.Verify(t.Context(), falHeaders(falRID, falUID, falTS, falSig), body)
			require.ErrorIs(t, err, signature.ErrKeys)
			// Again at once: still closed, and no second fetch (MinRefresh).
			_, err = f.Verify(t.Context(), falHeaders(falRID, falUID, falTS, falSig), body)
			require.ErrorIs(t, err, signature.ErrKeys)
			require.EqualValues(t, 1, srv.hits.Load())

			// The JWKS recovers: after MinRefresh the next delivery fetches it.
			srv.serve(http.StatusOK, good)
			c.Advance(falMinRf)
			_, err = f.Verify(t.Context(), falSign(vectorKey, falRID, c.ts(), body), body)
			require.NoError(t, err)
			require.EqualValues(t, 2, srv.hits.Load())

			// It fails again; an unknown key makes us refresh, the refresh
			// fails, and the good cache stays: the known key still verifies.
			srv.serve(status, tc.body)
			c.Advance(falMinRf)
			_, err = f.Verify(t.Context(), falSign(falKey(100), falRID, c.ts(), body), body)
			require.ErrorIs(t, err, signature.ErrNoMatch)
			require.EqualValues(t, 3, srv.hits.Load())
			_, err = f.Verify(t.Context(), falSign(vectorKey, falRID, c.ts(), body), body)
			require.NoError(t, err)

			// Staleness is bounded: past MaxStaleness the keys are refreshed
			// before use, and when that fails they are not trusted.
			c.Advance(24*time.Hour + time.Second)
			_, err = f.Verify(t.Context(), falSign(vectorKey, falRID, c.ts(), body), body)
			require.ErrorIs(t, err, signature.ErrKeys)
			require.EqualValues(t, 4, srv.hits.Load())
		})
	}
}

func TestFalUnusableKeysIgnored(t *testing.T) {
	t.Parallel()
	pub := vectorKey.Public().(ed25519.PublicKey)
	x := base64.RawURLEncoding.EncodeToString
	odd := func(m map[string]string, k, v string) map[string]string {
		m[k] = v
		return m
	}
	bad := []map[string]string{
		{"kty": "RSA", "n": "sXch", "e": "AQAB"},
		{"kty": "EC", "crv": "P-256", "x": x(pub), "y": x(pub)},
		odd(jwk("x25519", pub), "crv", "X25519"),
		odd(jwk("lower", pub), "kty", "okp"),
		odd(jwk("short", pub), "x", x(pub[:31])),
		odd(jwk("long", pub), "x", x(append(pub[:32:32], 0))),
		odd(jwk("empty", pub), "x", ""),
		odd(jwk("padded", pub), "x", base64.URLEncoding.EncodeToString(pub)),
		odd(jwk("std", pub), "x", base64.StdEncoding.EncodeToString(falKey(7).Public().(ed25519.PublicKey))+"+/"),
		{"kty": "OKP", "crv": "Ed25519"},
	}
	// Entries of another shape entirely.
	weird := `{"kty":"OKP","crv":"Ed25519","x":5},"a string",null,[1,2]`

	t.Run("alone", func(t *testing.T) {
		t.Parallel()
		doc := jwks(bad...)
		doc = doc[:len(doc)-2] + "," + weird + "]}"
		srv := newJWKSServer(t, doc)
		f := falVerifier(t, srv, newClock(falNow(t)))
		_, err := f.Verify(t.Context(), falHeaders(falRID, falUID, falTS, falSig), []byte(falBody))
		require.ErrorIs(t, err, signature.ErrKeys)
	})
	t.Run("beside a good key", func(t *testing.T) {
		t.Parallel()
		doc := jwks(append(bad, jwk(falKID, pub))...)
		doc = doc[:len(doc)-2] + "," + weird + "]}"
		srv := newJWKSServer(t, doc)
		f := falVerifier(t, srv, newClock(falNow(t)))
		_, err := f.Verify(t.Context(), falHeaders(falRID, falUID, falTS, falSig), []byte(falBody))
		require.NoError(t, err)
	})
}

func TestFalKeyRotation(t *testing.T) {
	t.Parallel()
	k1, k2, k3 := vectorKey, falKey(50), falKey(150)
	srv := newJWKSServer(t, jwks(jwk("k1", k1.Public().(ed25519.PublicKey))))
	c := newClock(falNow(t))
	f := falVerifier(t, srv, c)
	body := []byte(falBody)
	verify := func(key ed25519.PrivateKey) error {
		_, err := f.Verify(t.Context(), falSign(key, falRID, c.ts(), body), body)
		return err
	}

	require.NoError(t, verify(k1))
	require.EqualValues(t, 1, srv.hits.Load())

	// fal adds k2. Within MinRefresh of the last fetch, no refresh happens.
	srv.serve(http.StatusOK, jwks(jwk("k1", k1.Public().(ed25519.PublicKey)), jwk("k2", k2.Public().(ed25519.PublicKey))))
	c.Advance(falMinRf - time.Second)
	require.ErrorIs(t, verify(k2), signature.ErrNoMatch)
	require.EqualValues(t, 1, srv.hits.Load())

	// Past MinRefresh, the unknown key causes exactly one refresh.
	c.Advance(time.Second)
	require.NoError(t, verify(k2))
	require.EqualValues(t, 2, srv.hits.Load())
	for range 5 {
		require.NoError(t, verify(k2))
		require.NoError(t, verify(k1))
		require.ErrorIs(t, verify(k3), signature.ErrNoMatch)
	}
	require.EqualValues(t, 2, srv.hits.Load())

	// k1 is retired; once refreshed, its signatures no longer pass.
	srv.serve(http.StatusOK, jwks(jwk("k2", k2.Public().(ed25519.PublicKey))))
	c.Advance(falMinRf)
	require.ErrorIs(t, verify(k3), signature.ErrNoMatch) // triggers the refresh
	require.EqualValues(t, 3, srv.hits.Load())
	require.ErrorIs(t, verify(k1), signature.ErrNoMatch)
	require.NoError(t, verify(k2))
	require.EqualValues(t, 3, srv.hits.Load())
}

func TestFalStaleKeysRefreshed(t *testing.T) {
	t.Parallel()
	srv := newJWKSServer(t, jwks(jwk(falKID, vectorKey.Public().(ed25519.PublicKey))))
	c := newClock(falNow(t))
	f := falVerifier(t, srv, c)
	body := []byte(falBody)
	_, err := f.Verify(t.Context(), falSign(vectorKey, falRID, c.ts(), body), body)
	require.NoError(t, err)
	c.Advance(24 * time.Hour)
	_, err = f.Verify(t.Context(), falSign(vectorKey, falRID, c.ts(), body), body)
	require.NoError(t, err)
	require.EqualValues(t, 1, srv.hits.Load(), "24 h old keys are still fresh")
	c.Advance(time.Second)
	_, err = f.Verify(t.Context(), falSign(vectorKey, falRID, c.ts(), body), body)
	require.NoError(t, err)
	require.EqualValues(t, 2, srv.hits.Load(), "older keys are refreshed before use")
}

// TestFalConcurrentColdCache: many deliveries arrive before the keys are
// known. One JWKS fetch serves them all. (Whatever the interleaving, every
// caller must succeed with one fetch: early ones wait for it, late ones
// find the cache; the gate makes the waiting case the likely one.)
func TestFalConcurrentColdCache(t *testing.T) {
	t.Parallel()
	srv := newJWKSServer(t, jwks(jwk(falKID, vectorKey.Public().(ed25519.PublicKey))))
	gate := make(chan struct{})
	srv.mu.Lock()
	srv.gate = gate
	srv.mu.Unlock()
	f := falVerifier(t, srv, newClock(falNow(t)))

	const n = 32
	var started, done sync.WaitGroup
	errs := make([]error, n)
	started.Add(n)
	for i := range n {
		done.Go(func() {
			started.Done()
			_, errs[i] = f.Verify(t.Context(), falHeaders(falRID, falUID, falTS, falSig), []byte(falBody))
		})
	}
	started.Wait()
	require.Eventually(t, func() bool { return srv.hits.Load() == 1 }, 10*time.Second, time.Millisecond)
	close(gate)
	done.Wait()
	for i, err := range errs {
		require.NoError(t, err, i)
	}
	require.EqualValues(t, 1, srv.hits.Load())
}

// TestFalCanceledFetch: a fetch abandoned by its caller's context does not
// count against MinRefresh, and leaves no keys behind.
func TestFalCanceledFetch(t *testing.T) {
	t.Parallel()
	srv := newJWKSServer(t, jwks(jwk(falKID, vectorKey.Public().(ed25519.PublicKey))))
	gate := make(chan struct{})
	srv.mu.Lock()
	srv.gate = gate
	srv.mu.Unlock()
	f := falVerifier(t, srv, newClock(falNow(t)))

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := f.Verify(ctx, falHeaders(falRID, falUID, falTS, falSig), []byte(falBody))
		errc <- err
	}()
	require.Eventually(t, func() bool { return srv.hits.Load() == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	err := <-errc
	require.ErrorIs(t, err, signature.ErrKeys)
	require.ErrorIs(t, err, context.Canceled)

	close(gate)
	_, err = f.Verify(t.Context(), falHeaders(falRID, falUID, falTS, falSig), []byte(falBody))
	require.NoError(t, err, "the clock has not moved, yet a new fetch is allowed")
	require.EqualValues(t, 2, srv.hits.Load())
}
