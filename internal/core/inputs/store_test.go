package inputs_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/inputs"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
)

// setup opens a store with cfg on a fresh server.
func setup(t *testing.T, cfg inputs.Config) *inputs.Store {
	t.Helper()
	_, _, js := natstest.JetStream(t)
	s, err := inputs.Open(context.Background(), js, events.Default, cfg)
	require.NoError(t, err)
	return s
}

func put(t *testing.T, s *inputs.Store, owner string, b []byte) *inputs.File {
	t.Helper()
	f, err := s.Put(context.Background(), inputs.Upload{Owner: owner, Name: "a.png", ContentType: "image/png; x=1", Body: bytes.NewReader(b)})
	require.NoError(t, err)
	return f
}

func TestAFileIsItsOwnersOnly(t *testing.T) {
	t.Parallel()
	s := setup(t, inputs.Config{})
	ctx := context.Background()
	b := bytes.Repeat([]byte("pollux"), 100_000)
	f := put(t, s, "app", b)
	sum := sha256.Sum256(b)
	require.Equal(t, hex.EncodeToString(sum[:]), f.SHA256)
	require.Equal(t, int64(len(b)), f.Size)
	require.Equal(t, "image/png", f.ContentType, "the media type alone")

	got, err := s.Get(ctx, "app", f.ID)
	require.NoError(t, err)
	require.Equal(t, f.SHA256, got.SHA256)
	_, err = s.Get(ctx, "other", f.ID)
	require.ErrorIs(t, err, inputs.ErrNotFound, "another owner's file is not found")
	require.ErrorIs(t, s.Delete(ctx, "other", f.ID), inputs.ErrNotFound)
	list, err := s.List(ctx, "other")
	require.NoError(t, err)
	require.Empty(t, list)

	err = s.Check(ctx, "other", json.RawMessage(`{"image":"`+f.Ref()+`"}`), "input")
	var re *inputs.RefError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "input.image", re.Field)
	require.NoError(t, s.Check(ctx, "app", json.RawMessage(`{"frames":["x","`+f.Ref()+`"]}`), "input"))

	require.NoError(t, s.Delete(ctx, "app", f.ID))
	_, err = s.Get(ctx, "app", f.ID)
	require.ErrorIs(t, err, inputs.ErrNotFound)
}

func TestUploadsPastALimitAreRefused(t *testing.T) {
	t.Parallel()
	s := setup(t, inputs.Config{MaxFileBytes: 1000, MaxOwnerBytes: 1500})
	ctx := context.Background()
	_, err := s.Put(ctx, inputs.Upload{Owner: "app", Body: bytes.NewReader(make([]byte, 1001))})
	var tl *inputs.TooLargeError
	require.ErrorAs(t, err, &tl)
	require.False(t, tl.Owner)
	put(t, s, "app", make([]byte, 1000))
	_, err = s.Put(ctx, inputs.Upload{Owner: "app", Body: bytes.NewReader(make([]byte, 600))})
	require.ErrorAs(t, err, &tl)
	require.True(t, tl.Owner, "the owner's limit")
	put(t, s, "other", make([]byte, 600)) // another owner's room is its own
	list, err := s.List(ctx, "app")
	require.NoError(t, err)
	require.Len(t, list, 1, "nothing is left of the refused uploads")
	_, err = s.Put(ctx, inputs.Upload{Owner: "app", Body: bytes.NewReader(nil)})
	require.ErrorIs(t, err, inputs.ErrEmpty)
}

// broken reads n bytes, then fails: a client gone mid-upload.
type broken struct{ n int }

func (b *broken) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, errors.New("connection reset")
	}
	n := min(len(p), b.n)
	b.n -= n
	return n, nil
}

func TestAnInterruptedUploadLeavesNothing(t *testing.T) {
	t.Parallel()
	s := setup(t, inputs.Config{})
	_, err := s.Put(context.Background(), inputs.Upload{Owner: "app", Body: &broken{n: 1 << 20}})
	require.Error(t, err)
	list, err := s.List(context.Background(), "app")
	require.NoError(t, err)
	require.Empty(t, list)
}

func TestSignedURLs(t *testing.T) {
	t.Parallel()
	s := setup(t, inputs.Config{})
	ctx := context.Background()
	b := []byte("the image")
	f := put(t, s, "app", b)
	u, err := url.Parse(s.URL("https://pollux.example/", f))
	require.NoError(t, err)
	require.Equal(t, inputs.FetchPath(f.ID), u.Path)
	_, r, err := s.Fetch(ctx, f.ID, u.Query())
	require.NoError(t, err)
	got, _ := io.ReadAll(r)
	_ = r.Close()
	require.Equal(t, b, got)

	q := u.Query()
	q.Set("exp", "99999999999")
	_, _, err = s.Fetch(ctx, f.ID, q)
	require.ErrorIs(t, err, inputs.ErrBadSignature, "an altered expiry")
	other := put(t, s, "app", b)
	_, _, err = s.Fetch(ctx, other.ID, u.Query())
	require.ErrorIs(t, err, inputs.ErrBadSignature, "another file's signature")
}

func TestAnUploadURLIsUsedOnce(t *testing.T) {
	t.Parallel()
	now := time.Now()
	clock := func() time.Time { return now }
	s := setup(t, inputs.Config{UploadURLTTL: time.Minute, Now: clock})
	ctx := context.Background()
	tk, err := s.Issue(ctx, "app", "a.png", "image/png")
	require.NoError(t, err)
	u, err := url.Parse(tk.UploadURL("http://127.0.0.1:1"))
	require.NoError(t, err)
	require.Equal(t, inputs.UploadPath(tk.ID), u.Path)

	_, err = s.Redeem(ctx, tk.ID, url.Values{"exp": u.Query()["exp"], "sig": {strings.Repeat("0", 64)}}, "", strings.NewReader("x"))
	require.ErrorIs(t, err, inputs.ErrBadSignature, "a forged signature")
	_, err = s.Redeem(ctx, tk.ID, u.Query(), "", &broken{n: 10})
	require.Error(t, err, "an interrupted upload")
	f, err := s.Redeem(ctx, tk.ID, u.Query(), "", strings.NewReader("the image"))
	require.NoError(t, err, "the ticket outlives an interrupted upload")
	require.Equal(t, tk.ID, f.ID)
	require.Equal(t, "app", f.Owner)
	require.Equal(t, "image/png", f.ContentType)
	_, err = s.Redeem(ctx, tk.ID, u.Query(), "", strings.NewReader("again"))
	require.ErrorIs(t, err, inputs.ErrBadSignature, "used already")

	late, err := s.Issue(ctx, "app", "b.png", "")
	require.NoError(t, err)
	lu, _ := url.Parse(late.UploadURL(""))
	now = now.Add(2 * time.Minute)
	_, err = s.Redeem(ctx, late.ID, lu.Query(), "", strings.NewReader("x"))
	require.ErrorIs(t, err, inputs.ErrBadSignature, "expired")
	_, err = s.Redeem(ctx, "nope", lu.Query(), "", strings.NewReader("x"))
	require.ErrorIs(t, err, inputs.ErrBadSignature, "never issued")
}

func TestDeliver(t *testing.T) {
	t.Parallel()
	s := setup(t, inputs.Config{})
	ctx := context.Background()
	small, big := put(t, s, "app", []byte("tiny")), put(t, s, "app", make([]byte, 5000))
	in := json.RawMessage(`{"a":"` + small.Ref() + `","b":["` + big.Ref() + `"],"n":1.50}`)
	out, err := s.Deliver(ctx, in, inputs.Delivery{PublicURL: "https://pollux.example", InlineMaxBytes: 100})
	require.NoError(t, err)
	var got struct {
		A string
		B []string
		N json.Number
	}
	require.NoError(t, json.Unmarshal(out, &got))
	require.Equal(t, "data:image/png;base64,dGlueQ==", got.A)
	require.True(t, strings.HasPrefix(got.B[0], "https://pollux.example"+inputs.FetchPath(big.ID)+"?"), got.B[0])
	require.Equal(t, json.Number("1.50"), got.N, "numbers kept as written")
	again, err := s.Deliver(ctx, in, inputs.Delivery{PublicURL: "https://pollux.example", InlineMaxBytes: 100})
	require.NoError(t, err)
	require.Equal(t, string(out), string(again), "a retried create sends the same")

	_, err = s.Deliver(ctx, in, inputs.Delivery{InlineMaxBytes: 100})
	var re *inputs.RefError
	require.ErrorAs(t, err, &re, "no way to deliver the big one")
	require.Equal(t, "input.b[0]", re.Field)
	plain := json.RawMessage(`{"prompt":"a cat"}`)
	out, err = s.Deliver(ctx, plain, inputs.Delivery{})
	require.NoError(t, err)
	require.Equal(t, string(plain), string(out))
}

// trickle reads n bytes a few hundred at a time, as a multipart part is
// read.
type trickle struct{ n int }

func (t *trickle) Read(p []byte) (int, error) {
	if t.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), t.n, 500)
	clear(p[:k])
	t.n -= k
	return k, nil
}

// A body read a little at a time is stored in full chunks: the object
// store makes a chunk of each read, and thousands of small ones would
// stall its publishes (a Put failing "stalled with too many outstanding
// async published messages" under load).
func TestASlowBodyIsStoredInFullChunks(t *testing.T) {
	t.Parallel()
	s := setup(t, inputs.Config{})
	f, err := s.Put(context.Background(), inputs.Upload{Owner: "app", Body: &trickle{n: 3 << 20}})
	require.NoError(t, err)
	require.Equal(t, int64(3<<20), f.Size)
	require.Equal(t, 24, inputs.Chunks(t, s, f.ID), "3 MiB in 128 KiB chunks")
}

// A file about to expire may not be named by a create (the provider
// might fetch it too late), and an expired one is not found.
func TestAnExpiringFileIsRefused(t *testing.T) {
	t.Parallel()
	now := time.Now()
	clock := func() time.Time { return now }
	s := setup(t, inputs.Config{TTL: time.Hour, Now: clock})
	ctx := context.Background()
	f := put(t, s, "app", []byte("frame"))
	in := json.RawMessage(`{"image":"` + f.Ref() + `"}`)
	require.NoError(t, s.Check(ctx, "app", in, "input"))

	now = now.Add(55 * time.Minute) // 5 min left, under a tenth of the TTL
	var re *inputs.RefError
	require.ErrorAs(t, s.Check(ctx, "app", in, "input"), &re)
	require.Equal(t, "input.image", re.Field)
	require.Contains(t, re.Error(), "expires in less than")

	now = now.Add(10 * time.Minute)
	_, err := s.Get(ctx, "app", f.ID)
	require.ErrorIs(t, err, inputs.ErrNotFound, "expired")
	_, err = s.Deliver(ctx, in, inputs.Delivery{PublicURL: "https://pollux.example"})
	require.ErrorAs(t, err, &re, "a create whose file expired meanwhile fails naming the field")
}
