package signature_test

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/signature"
)

// validMarker in a fuzzed signature header stands for the correct signature
// of the fuzzed id, timestamp and body, so the fuzzer explores headers that
// should pass as well as ones that should not.
const validMarker = "VALID"

// refStandard is an independent Standard Webhooks v1 check, written like
// the reference library but signing the raw timestamp (as openai-go does):
// any space-separated entry equal to "v1,<expected>" and a timestamp within
// 5 min. It has none of this package's stricter rules.
func refStandard(secret []byte, now time.Time, id, ts, sigHeader string, body []byte) bool {
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	if d := now.Unix() - n; d > 300 || d < -300 {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, entry := range strings.Split(sigHeader, " ") {
		if entry == want {
			return true
		}
	}
	return false
}

// token: 1 to 256 bytes of printable ASCII without space, the ids Verify
// accepts ('.' aside).
func token(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for _, c := range []byte(s) {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// canonicalTS: 1 to 12 digits without a leading zero, or "0".
func canonicalTS(ts string) bool {
	return ts != "" && len(ts) <= 12 && (len(ts) == 1 || ts[0] != '0') &&
		strings.Trim(ts, "0123456789") == ""
}

// strictOK says whether the inputs obey the rules by which Verify is
// stricter than refStandard: an id token without '.', a canonical
// timestamp, and a header of at most 4 KiB and 8 non-empty entries.
func strictOK(id, ts, sigHeader string) bool {
	entries := 0
	for _, e := range strings.Split(sigHeader, " ") {
		if e != "" {
			entries++
		}
	}
	return token(id) && !strings.Contains(id, ".") && canonicalTS(ts) &&
		len(sigHeader) <= 4096 && entries <= 8
}

func FuzzVerify(f *testing.F) {
	for _, vec := range vectors {
		f.Add(vec.id, vec.ts, vec.sig, []byte(vec.body))
		f.Add(vec.id, vec.ts, strings.Join(vec.bad, " ")+" "+vec.sig, []byte(vec.body))
	}
	f.Add(vecA.id, vecA.ts, validMarker, []byte(vecA.body))
	f.Add(vecA.id, vecA.ts, "v1a,xyz  "+validMarker+",x", []byte(vecA.body))
	f.Add(vecA.id, "0"+vecA.ts, validMarker, []byte(vecA.body))
	f.Add(vecA.id, "+"+vecA.ts, validMarker, []byte(vecA.body))
	f.Add("m.1614265000", vecA.ts, validMarker, []byte("{}"))
	f.Add(vecA.id, "1614265630", "v1,"+validMarker+"\tv1,x", []byte{})

	key, err := signature.ParseSecret(vecA.secret)
	require.NoError(f, err)
	now := time.Unix(1614265330, 0)
	v := &signature.Verifier{Secrets: [][]byte{key}, Now: func() time.Time { return now }}

	f.Fuzz(func(t *testing.T, id, ts, sigHeader string, body []byte) {
		if strings.Contains(sigHeader, validMarker) {
			mac := hmac.New(sha256.New, key)
			mac.Write([]byte(id + "." + ts + "."))
			mac.Write(body)
			sigHeader = strings.ReplaceAll(sigHeader, validMarker, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
		}
		h := headers(id, ts, sigHeader)
		got, err := v.Verify(h, body)
		ref := refStandard(key, now, id, ts, sigHeader, body)
		if err == nil {
			require.True(t, ref, "accepted what the reference refuses")
			require.Equal(t, id, got)
			return
		}
		require.Empty(t, got)
		if ref && strictOK(id, ts, sigHeader) {
			t.Fatalf("refused what the reference accepts, breaking no stricter rule: %v", err)
		}
		if !errors.Is(err, signature.ErrMissingHeader) && !errors.Is(err, signature.ErrBadID) &&
			!errors.Is(err, signature.ErrBadTimestamp) && !errors.Is(err, signature.ErrTooOld) &&
			!errors.Is(err, signature.ErrTooNew) && !errors.Is(err, signature.ErrBadSignatureHeader) &&
			!errors.Is(err, signature.ErrNoMatch) {
			t.Fatalf("error wraps no sentinel: %v", err)
		}
	})
}

func FuzzFalVerify(f *testing.F) {
	f.Add(falRID, falUID, falTS, falSig, []byte(falBody))
	f.Add(falRID, falUID, falTS, validMarker, []byte(falBody))
	f.Add(falRID, "user-456", falTS, validMarker, []byte(falBody))
	f.Add(falRID, falUID, "0"+falTS, validMarker, []byte{})
	f.Add("a\nb", falUID, "1700000300", validMarker, []byte("x"))
	f.Add(falRID, falUID, falTS, strings.ToUpper(falSig), []byte(falBody))

	srv := newJWKSServer(f, jwks(jwk(falKID, vectorKey.Public().(ed25519.PublicKey))))
	now := time.Unix(1700000000, 0)
	fv, err := signature.NewFalVerifier(signature.FalVerifier{
		JWKSURL: srv.URL, HTTPClient: srv.Client(), UserID: falUID,
		Now: func() time.Time { return now },
	})
	require.NoError(f, err)
	pub := vectorKey.Public().(ed25519.PublicKey)

	f.Fuzz(func(t *testing.T, rid, uid, ts, sigHex string, body []byte) {
		if sigHex == validMarker {
			sigHex = hex.EncodeToString(ed25519.Sign(vectorKey, falMessage(rid, uid, ts, body)))
		}
		got, err := fv.Verify(t.Context(), falHeaders(rid, uid, ts, sigHex), body)

		// The reference: the pinned user, a parseable timestamp within
		// 300 s, and ed25519.Verify of fal's message with the test key.
		ref := false
		n, tsErr := strconv.ParseInt(ts, 10, 64)
		sig, sigErr := hex.DecodeString(sigHex)
		if uid == falUID && tsErr == nil && n-now.Unix() <= 300 && now.Unix()-n <= 300 &&
			sigErr == nil && len(sig) == ed25519.SignatureSize {
			ref = ed25519.Verify(pub, falMessage(rid, uid, ts, body), sig)
		}
		if err == nil {
			require.True(t, ref, "accepted what the reference refuses")
			require.Equal(t, rid, got)
			return
		}
		require.Empty(t, got)
		require.NotErrorIs(t, err, signature.ErrKeys, "the JWKS is good")
		// Stricter than the reference: the request id (printable ASCII, no
		// spaces, at most 256 bytes) and the canonical timestamp.
		if ref && token(rid) && canonicalTS(ts) {
			t.Fatalf("refused what the reference accepts, breaking no stricter rule: %v", err)
		}
	})
}
