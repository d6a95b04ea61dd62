package signature_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/signature"
)

// vector is a published Standard Webhooks test vector (webhooks.md §1).
type vector struct {
	name, secret, id, ts, body, sig string
	bad                             []string // known-bad signatures for it
}

var vectors = []vector{
	{
		name:   "A",
		secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		id:     "msg_p5jXN8AQM9LWM0D4loKWxJek",
		ts:     "1614265330",
		body:   `{"test": 2432232314}`,
		sig:    "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
		bad:    []string{"v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=", "v1,"},
	},
	{
		name:   "B",
		secret: "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
		id:     "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
		ts:     "1649367553",
		body:   `{"email":"test@example.com","username":"test_user"}`,
		sig:    "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=",
		bad: []string{
			"v1,R3PTzyfHASBKHH98a7yexTwaJ4yNIcGhFQc1yuN+BPU=",
			"v1,tFtCZ5RDCPxzWQRWXWPgrCgE2frDBe9gjpbWQxnVfsQ=",
			"v1,Mm7xgUVICxZfQ3bgf0h0Dof65L/IFx+PnZvnDWPCX6Q=",
			"v1,9DfC1c3eeOrXB6w/5dIDydLNQaEyww5KalE5jLBZucE=",
			"v1,",
		},
	},
	{
		name:   "C",
		secret: "whsec_RdvaYFYUXuIFuEbvZHwMfYFhUf7aMYjYcmM24+Aj40c=",
		id:     "wh_685c059ae39c8190af8c71ed1022a24d",
		ts:     "1750861210",
		body:   `{"id": "evt_685c059ae3a481909bdc86819b066fb6", "object": "event", "created_at": 1750861210, "type": "response.completed", "data": {"id": "resp_123"}}`,
		sig:    "v1,gUAg4R2hWouRZqRQG4uJypNS8YK885G838+EHb4nKBY=",
		bad:    []string{"v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=", "v1,"},
	},
}

var vecA = vectors[0]

func unix(t *testing.T, ts string) time.Time {
	t.Helper()
	n, err := strconv.ParseInt(ts, 10, 64)
	require.NoError(t, err)
	return time.Unix(n, 0)
}

// verifier returns a Verifier for secrets whose clock reads now.
func verifier(t *testing.T, now time.Time, secrets ...string) *signature.Verifier {
	t.Helper()
	v, err := signature.NewVerifier(secrets...)
	require.NoError(t, err)
	v.Now = func() time.Time { return now }
	return v
}

// headers builds the three Standard Webhooks headers; an empty argument
// leaves its header out.
func headers(id, ts, sig string) http.Header {
	h := http.Header{}
	for name, val := range map[string]string{"webhook-id": id, "webhook-timestamp": ts, "webhook-signature": sig} {
		if val != "" {
			h.Set(name, val)
		}
	}
	return h
}

func TestVectors(t *testing.T) {
	t.Parallel()
	for _, vec := range vectors {
		t.Run(vec.name, func(t *testing.T) {
			t.Parallel()
			key, err := signature.ParseSecret(vec.secret)
			require.NoError(t, err)
			require.Equal(t, vec.sig, signature.Sign(key, vec.id, unix(t, vec.ts), []byte(vec.body)))

			v := verifier(t, unix(t, vec.ts), vec.secret)
			id, err := v.Verify(headers(vec.id, vec.ts, vec.sig), []byte(vec.body))
			require.NoError(t, err)
			require.Equal(t, vec.id, id)

			for _, bad := range vec.bad {
				id, err := v.Verify(headers(vec.id, vec.ts, bad), []byte(vec.body))
				require.ErrorIs(t, err, signature.ErrNoMatch, bad)
				require.Empty(t, id)
			}
			// The decoys before the valid signature do not hide it.
			all := strings.Join(append(append([]string{}, vec.bad...), vec.sig), " ")
			_, err = v.Verify(headers(vec.id, vec.ts, all), []byte(vec.body))
			require.NoError(t, err)
			// Re-serialised JSON (different whitespace) does not verify.
			_, err = v.Verify(headers(vec.id, vec.ts, vec.sig), []byte(vec.body+" "))
			require.ErrorIs(t, err, signature.ErrNoMatch)
		})
	}
}

func TestFlipAnyByteFails(t *testing.T) {
	t.Parallel()
	v := verifier(t, unix(t, vecA.ts), vecA.secret)
	flip := func(s string, i int) string {
		b := []byte(s)
		b[i] ^= 0x01
		return string(b)
	}
	for i := range len(vecA.body) {
		_, err := v.Verify(headers(vecA.id, vecA.ts, vecA.sig), []byte(flip(vecA.body, i)))
		require.ErrorIs(t, err, signature.ErrNoMatch, "body byte %d", i)
	}
	for i := range len(vecA.id) {
		_, err := v.Verify(headers(flip(vecA.id, i), vecA.ts, vecA.sig), []byte(vecA.body))
		require.Error(t, err, "id byte %d", i)
	}
	for i := range len(vecA.ts) {
		_, err := v.Verify(headers(vecA.id, flip(vecA.ts, i), vecA.sig), []byte(vecA.body))
		require.Error(t, err, "timestamp byte %d", i)
	}
	for i := range len(vecA.sig) {
		_, err := v.Verify(headers(vecA.id, vecA.ts, flip(vecA.sig, i)), []byte(vecA.body))
		require.ErrorIs(t, err, signature.ErrNoMatch, "signature byte %d", i)
	}
}

func TestTimestampWindow(t *testing.T) {
	t.Parallel()
	ts := unix(t, vecA.ts)
	for _, tc := range []struct {
		skew time.Duration // now - ts
		want error
	}{
		{0, nil},
		{300 * time.Second, nil},
		{-300 * time.Second, nil},
		{301 * time.Second, signature.ErrTooOld},
		{-301 * time.Second, signature.ErrTooNew},
		{300*time.Second + time.Millisecond, signature.ErrTooOld},
		{24 * time.Hour, signature.ErrTooOld},
		{-24 * time.Hour, signature.ErrTooNew},
	} {
		v := verifier(t, ts.Add(tc.skew), vecA.secret)
		_, err := v.Verify(headers(vecA.id, vecA.ts, vecA.sig), []byte(vecA.body))
		if tc.want == nil {
			require.NoError(t, err, tc.skew)
		} else {
			require.ErrorIs(t, err, tc.want, tc.skew)
		}
	}

	// A custom tolerance applies in both directions too.
	v := verifier(t, ts.Add(10*time.Second), vecA.secret)
	v.Tolerance = 10 * time.Second
	_, err := v.Verify(headers(vecA.id, vecA.ts, vecA.sig), []byte(vecA.body))
	require.NoError(t, err)
	v.Now = func() time.Time { return ts.Add(11 * time.Second) }
	_, err = v.Verify(headers(vecA.id, vecA.ts, vecA.sig), []byte(vecA.body))
	require.ErrorIs(t, err, signature.ErrTooOld)
}

func TestMalformedTimestamps(t *testing.T) {
	t.Parallel()
	v := verifier(t, unix(t, vecA.ts), vecA.secret)
	for _, ts := range []string{
		"abc", "+" + vecA.ts, "0" + vecA.ts, "-1", vecA.ts + ".0", "9223372036854775808",
		"1234567890123", " " + vecA.ts, vecA.ts + " ", "1e9", "0x6037d5f2", "１６１４２６５３３０",
		vecA.ts + "\x00",
	} {
		_, err := v.Verify(headers(vecA.id, ts, vecA.sig), []byte(vecA.body))
		require.ErrorIs(t, err, signature.ErrBadTimestamp, "%q", ts)
	}
	// "0" is well formed, just old; 12 digits are well formed, just far ahead.
	_, err := v.Verify(headers(vecA.id, "0", vecA.sig), []byte(vecA.body))
	require.ErrorIs(t, err, signature.ErrTooOld)
	_, err = v.Verify(headers(vecA.id, "999999999999", vecA.sig), []byte(vecA.body))
	require.ErrorIs(t, err, signature.ErrTooNew)
}

func TestSignatureHeaders(t *testing.T) {
	t.Parallel()
	v := verifier(t, unix(t, vecA.ts), vecA.secret)
	valid := vecA.sig
	b64 := strings.TrimPrefix(valid, "v1,")
	decoy := vecA.bad[0]
	for _, tc := range []struct {
		name, header string
		want         error
	}{
		{"valid", valid, nil},
		{"empty v1", "v1,", signature.ErrNoMatch},
		{"no comma", "v1", signature.ErrNoMatch},
		{"upper-case version", "V1," + b64, signature.ErrNoMatch},
		{"only v2", "v2," + b64, signature.ErrNoMatch},
		{"only v1a", "v1a," + b64, signature.ErrNoMatch},
		{"non-base64", "v1,!!!!not-base64!!!!", signature.ErrNoMatch},
		{"base64url", "v1," + base64URL(t, b64), signature.ErrNoMatch},
		{"no padding", "v1," + strings.TrimRight(b64, "="), signature.ErrNoMatch},
		{"extra comma part", valid + ",x", signature.ErrNoMatch},
		{"tab separators", decoy + "\t" + valid, signature.ErrNoMatch},
		{"leading space in entry value", "v1, " + b64, signature.ErrNoMatch},
		{"decoys then valid", strings.Join([]string{"v1a,abc", decoy, "v2,xyz", valid}, " "), nil},
		{"double spaces", decoy + "  " + valid + " ", nil},
		{"8 entries", strings.Repeat(decoy+" ", 7) + valid, nil},
		{"9 entries", strings.Repeat(decoy+" ", 8) + valid, signature.ErrBadSignatureHeader},
		{"1000 entries", strings.Repeat("v2,x ", 999) + valid, signature.ErrBadSignatureHeader},
		{"64 KiB", valid + " v2," + strings.Repeat("a", 64<<10), signature.ErrBadSignatureHeader},
		{"only spaces", "   ", signature.ErrMissingHeader},
	} {
		_, err := v.Verify(headers(vecA.id, vecA.ts, tc.header), []byte(vecA.body))
		if tc.want == nil {
			require.NoError(t, err, tc.name)
		} else {
			require.ErrorIs(t, err, tc.want, tc.name)
		}
	}
}

func base64URL(t *testing.T, std string) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(std)
	require.NoError(t, err)
	u := base64.URLEncoding.EncodeToString(raw)
	require.NotEqual(t, std, u, "the vector should have + or /")
	return u
}

func TestHeaderLines(t *testing.T) {
	t.Parallel()
	v := verifier(t, unix(t, vecA.ts), vecA.secret)
	body := []byte(vecA.body)

	// A second webhook-signature line is read too: entries of all lines count.
	h := headers(vecA.id, vecA.ts, vecA.bad[0])
	h.Add("webhook-signature", vecA.sig)
	_, err := v.Verify(h, body)
	require.NoError(t, err)

	// ... and so do the caps, over all lines together.
	h = headers(vecA.id, vecA.ts, strings.Repeat(vecA.bad[0]+" ", 5))
	h.Add("webhook-signature", strings.Repeat(vecA.bad[0]+" ", 3)+vecA.sig)
	_, err = v.Verify(h, body)
	require.ErrorIs(t, err, signature.ErrBadSignatureHeader)
	h = headers(vecA.id, vecA.ts, vecA.sig)
	for range 3 {
		h.Add("webhook-signature", "v2,"+strings.Repeat("a", 1500))
	}
	_, err = v.Verify(h, body)
	require.ErrorIs(t, err, signature.ErrBadSignatureHeader)

	// Duplicate id or timestamp lines are rejected, even when identical.
	h = headers(vecA.id, vecA.ts, vecA.sig)
	h.Add("webhook-id", vecA.id)
	_, err = v.Verify(h, body)
	require.ErrorIs(t, err, signature.ErrBadID)
	h = headers(vecA.id, vecA.ts, vecA.sig)
	h.Add("webhook-timestamp", vecA.ts)
	_, err = v.Verify(h, body)
	require.ErrorIs(t, err, signature.ErrBadTimestamp)

	// Missing or empty headers.
	for _, h := range []http.Header{
		headers("", vecA.ts, vecA.sig),
		headers(vecA.id, "", vecA.sig),
		headers(vecA.id, vecA.ts, ""),
		{"Webhook-Id": {""}, "Webhook-Timestamp": {vecA.ts}, "Webhook-Signature": {vecA.sig}},
		{"Webhook-Id": {vecA.id}, "Webhook-Timestamp": {vecA.ts}, "Webhook-Signature": {""}},
		{},
	} {
		_, err := v.Verify(h, body)
		require.ErrorIs(t, err, signature.ErrMissingHeader, h)
	}
}

func TestIDs(t *testing.T) {
	t.Parallel()
	key, err := signature.ParseSecret(vecA.secret)
	require.NoError(t, err)
	ts := unix(t, vecA.ts)
	v := verifier(t, ts, vecA.secret)
	body := []byte(vecA.body)
	for _, tc := range []struct {
		id   string
		want error
	}{
		{strings.Repeat("a", 256), nil},
		{`msg_!"#$%&'()*+,-/:;<=>?@[\]^_{|}~`, nil},
		{strings.Repeat("a", 257), signature.ErrBadID},
		{"msg.1", signature.ErrBadID},
		{"msg 1", signature.ErrBadID},
		{"msg\t1", signature.ErrBadID},
		{"msg\n1", signature.ErrBadID},
		{"msg\x001", signature.ErrBadID},
		{"msg\x7f1", signature.ErrBadID},
		{"msg_é", signature.ErrBadID},
		{"msg\u00a01", signature.ErrBadID},
	} {
		h := headers(tc.id, vecA.ts, signature.Sign(key, tc.id, ts, body))
		got, err := v.Verify(h, body)
		if tc.want == nil {
			require.NoError(t, err, "%q", tc.id)
			require.Equal(t, tc.id, got)
		} else {
			require.ErrorIs(t, err, tc.want, "%q", tc.id)
		}
	}
}

// TestDotAmbiguity is webhooks.md §6 item 6: the content for (id m, ts T1,
// body "T2.{}") and for (id "m.T1", ts T2, body "{}") is the same string, so
// one signature would serve both, with a fresh T2 in the second. Ids with
// '.' are rejected, which leaves one reading of every signed content.
func TestDotAmbiguity(t *testing.T) {
	t.Parallel()
	key, err := signature.ParseSecret(vecA.secret)
	require.NoError(t, err)
	const m = "msg_1"
	t1, t2 := unix(t, "1614265000"), unix(t, vecA.ts)
	v := verifier(t, t2, vecA.secret)

	// A genuine delivery (m, T1, "T2.{}") replayed as ("m.T1", T2, "{}").
	sig := signature.Sign(key, m, t1, []byte(vecA.ts+".{}"))
	require.Equal(t, sig, signature.Sign(key, m+".1614265000", t2, []byte("{}")), "same content")
	_, err = v.Verify(headers(m+".1614265000", vecA.ts, sig), []byte("{}"))
	require.ErrorIs(t, err, signature.ErrBadID)
	atT1 := verifier(t, t1, vecA.secret)
	_, err = atT1.Verify(headers(m, "1614265000", sig), []byte(vecA.ts+".{}"))
	require.NoError(t, err, "the genuine delivery itself passes in its time")

	// The other direction: a delivery with a dotted id is refused even when
	// genuine, and replaying its signature as the undotted reading carries
	// the older T1, which the window refuses.
	sig = signature.Sign(key, m+".1614265000", t2, []byte("{}"))
	_, err = v.Verify(headers(m+".1614265000", vecA.ts, sig), []byte("{}"))
	require.ErrorIs(t, err, signature.ErrBadID)
	later := verifier(t, t2.Add(time.Minute), vecA.secret)
	_, err = later.Verify(headers(m, "1614265000", sig), []byte(vecA.ts+".{}"))
	require.ErrorIs(t, err, signature.ErrTooOld)
}

func TestRotation(t *testing.T) {
	t.Parallel()
	vecC := vectors[2]
	keyA, err := signature.ParseSecret(vecA.secret)
	require.NoError(t, err)
	keyC, err := signature.ParseSecret(vecC.secret)
	require.NoError(t, err)
	ts := unix(t, vecA.ts)
	body := []byte(vecA.body)
	v := verifier(t, ts, vecA.secret, vecC.secret)

	for _, sig := range []string{
		signature.Sign(keyA, vecA.id, ts, body),
		signature.Sign(keyC, vecA.id, ts, body),
		signature.Sign(keyA, vecA.id, ts, body) + " " + signature.Sign(keyC, vecA.id, ts, body),
		vecA.bad[0] + " v1a,xyz " + signature.Sign(keyC, vecA.id, ts, body),
	} {
		_, err := v.Verify(headers(vecA.id, vecA.ts, sig), body)
		require.NoError(t, err, sig)
	}

	// Signed only with a secret that is not configured.
	only := verifier(t, ts, vecC.secret)
	_, err = only.Verify(headers(vecA.id, vecA.ts, signature.Sign(keyA, vecA.id, ts, body)), body)
	require.ErrorIs(t, err, signature.ErrNoMatch)
}

func TestParseSecret(t *testing.T) {
	t.Parallel()
	b64 := func(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }
	const secretish = "c2VjcmV0LXZhbHVlLW5vdC10by1sZWFr" // must never show up in errors
	for _, tc := range []struct {
		name, in string
		want     int // decoded length; 0 = error
	}{
		{"A", vecA.secret, 24},
		{"C", vectors[2].secret, 32},
		{"64 bytes", "whsec_" + b64(64), 64},
		{"empty", "", 0},
		{"prefix only", "whsec_", 0},
		{"missing prefix", strings.TrimPrefix(vecA.secret, "whsec_"), 0},
		{"wrong prefix", "whsk_" + b64(32), 0},
		{"upper-case prefix", "WHSEC_" + b64(32), 0},
		{"non-base64", "whsec_!!!!" + secretish, 0},
		{"base64url", "whsec_" + base64.URLEncoding.EncodeToString([]byte(strings.Repeat("\xfb\xff", 16))), 0},
		{"no padding", "whsec_" + strings.TrimRight(b64(32), "="), 0},
		{"non-zero padding bits", "whsec_" + b64(31)[:len(b64(31))-2] + "B=", 0},
		{"embedded newline", "whsec_" + b64(24)[:16] + "\n" + b64(24)[16:], 0},
		{"trailing space", vecA.secret + " ", 0},
		{"23 bytes", "whsec_" + b64(23), 0},
		{"65 bytes", "whsec_" + b64(65), 0},
		{"secret-like content, 24 bytes short", "whsec_" + secretish[:28], 0},
	} {
		key, err := signature.ParseSecret(tc.in)
		if tc.want == 0 {
			require.Error(t, err, tc.name)
			require.NotContains(t, err.Error(), secretish[:8], tc.name)
			require.NotContains(t, err.Error(), "AAAA", tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		require.Len(t, key, tc.want, tc.name)
	}
}

func TestVerifierConfig(t *testing.T) {
	t.Parallel()
	_, err := signature.NewVerifier()
	require.Error(t, err)
	_, err = signature.NewVerifier(vecA.secret, "whsec_")
	require.ErrorContains(t, err, "secret 1")

	h, body := headers(vecA.id, vecA.ts, vecA.sig), []byte(vecA.body)
	now := func() time.Time { return unix(t, vecA.ts) }
	for name, v := range map[string]*signature.Verifier{
		"no secrets":         {Now: now},
		"empty secret":       {Secrets: [][]byte{{}}, Now: now},
		"short secret":       {Secrets: [][]byte{make([]byte, 23)}, Now: now},
		"negative tolerance": {Secrets: [][]byte{make([]byte, 24)}, Now: now, Tolerance: -1},
		"negative max":       {Secrets: [][]byte{make([]byte, 24)}, Now: now, MaxSignatures: -1},
	} {
		_, err := v.Verify(h, body)
		require.Error(t, err, name)
		for _, sentinel := range []error{signature.ErrNoMatch, signature.ErrMissingHeader} {
			require.NotErrorIs(t, err, sentinel, name)
		}
	}

	// An empty key verifies nothing, even a signature made with it.
	v := &signature.Verifier{Secrets: [][]byte{{}}, Now: now}
	_, err = v.Verify(headers(vecA.id, vecA.ts, signature.Sign(nil, vecA.id, now(), body)), body)
	require.Error(t, err)
}

func TestErrorsDoNotEchoHeaders(t *testing.T) {
	t.Parallel()
	v := verifier(t, unix(t, vecA.ts), vecA.secret)
	const marker = "INJECTED"
	for _, h := range []http.Header{
		headers("msg."+marker, vecA.ts, vecA.sig),
		headers(vecA.id, marker, vecA.sig),
		headers(vecA.id, vecA.ts, "v1,"+marker),
	} {
		_, err := v.Verify(h, []byte(vecA.body))
		require.Error(t, err)
		require.NotContains(t, err.Error(), marker)
	}
}

func ExampleSign() {
	key, err := signature.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	fmt.Println(signature.Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`)))
	// Output: v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
}
