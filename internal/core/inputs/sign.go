package inputs

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Signed URLs. A file's fetch URL and an upload ticket's PUT URL are
// paths of the front door (FetchPath, UploadPath) with an expiry and an
// HMAC of what they allow under the file's (or ticket's) own key, so any
// process verifies them and nothing else need be shared.

// FetchPath is the front door's path of file id's bytes, answered to
// anyone holding a signed URL, without a token.
func FetchPath(id string) string { return "/v1/inputs/" + id }

// UploadPath is the front door's path of ticket id's upload, answered to
// anyone holding its signed URL, without a token.
func UploadPath(id string) string { return "/v1/inputs/" + id + "/upload" }

// sign is the signature of what (get or put) of id until exp under key.
func sign(key []byte, what, id string, exp int64) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "pollux input %s\n%s\n%d", what, id, exp)
	return hex.EncodeToString(m.Sum(nil))
}

// signed is base's URL of path, signed for what until exp.
func signed(base, path string, key []byte, what, id string, exp int64) string {
	q := url.Values{"exp": {strconv.FormatInt(exp, 10)}, "sig": {sign(key, what, id, exp)}}
	return strings.TrimSuffix(base, "/") + path + "?" + q.Encode()
}

// verify checks a signature of what (from a URL's query q) under key at
// now.
func verify(key []byte, what, id string, q url.Values, now time.Time) error {
	exp, err := strconv.ParseInt(q.Get("exp"), 10, 64)
	if err != nil || len(key) == 0 || now.Unix() > exp ||
		!hmac.Equal([]byte(q.Get("sig")), []byte(sign(key, what, id, exp))) {
		return ErrBadSignature
	}
	return nil
}

// URL is a signed URL of file f on base (the front door's public base
// URL), valid as long as the file is: a create retried sends the
// provider the same URL.
func (s *Store) URL(base string, f *File) string {
	return signed(base, FetchPath(f.ID), f.key, "get", f.ID, f.ExpiresAt.Unix())
}

// Fetch opens file id for a signed URL's request (its query q): the
// file and a reader of its bytes, streamed from the bucket, which the
// caller closes. ErrBadSignature for a URL not signed for it or expired,
// ErrNotFound for a file gone.
func (s *Store) Fetch(ctx context.Context, id string, q url.Values) (*File, io.ReadCloser, error) {
	f, err := s.lookup(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if err := verify(f.key, "get", id, q, s.cfg.Now()); err != nil {
		return nil, nil, err
	}
	r, err := s.obs.Get(ctx, fileObject(id))
	switch {
	case errors.Is(err, jetstream.ErrObjectNotFound):
		return nil, nil, ErrNotFound
	case err != nil:
		return nil, nil, fmt.Errorf("reading file %s: %w", id, err)
	}
	return f, r, nil
}

// Open reads file id, whoever owns it, for Pollux's own use (a delivery
// inline): the caller closes the reader.
func (s *Store) Open(ctx context.Context, id string) (*File, io.ReadCloser, error) {
	f, err := s.lookup(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	r, err := s.obs.Get(ctx, fileObject(id))
	if err != nil {
		return nil, nil, fmt.Errorf("reading file %s: %w", id, err)
	}
	return f, r, nil
}

// Ticket is an upload issued and not made yet: the file it will be has
// its id, so an app may name the file before it uploads it (fal's
// file_url).
type Ticket struct {
	// ID is the file's id once uploaded.
	ID string
	// ExpiresAt ends the upload URL.
	ExpiresAt time.Time
	key       []byte
}

// Issue issues an upload of one file by owner: the ticket, whose
// UploadURL a plain PUT of the bytes redeems once (Redeem) until its
// ExpiresAt.
func (s *Store) Issue(ctx context.Context, owner, name, contentType string) (*Ticket, error) {
	if owner == "" {
		return nil, errors.New("inputs: an upload needs an owner")
	}
	t := &Ticket{ID: newID(), ExpiresAt: s.cfg.Now().Add(s.cfg.UploadURLTTL).Truncate(time.Second), key: make([]byte, 32)}
	_, _ = rand.Read(t.key)
	meta := jetstream.ObjectMeta{Name: ticketObject(t.ID), Metadata: map[string]string{
		metaOwner: owner, metaName: bound(name, 255), metaType: mediaType(contentType),
		metaKey: hex.EncodeToString(t.key), metaExpires: strconv.FormatInt(t.ExpiresAt.Unix(), 10),
	}}
	if _, err := s.obs.Put(ctx, meta, strings.NewReader("")); err != nil {
		return nil, fmt.Errorf("issuing an upload: %w", err)
	}
	return t, nil
}

// UploadURL is ticket t's signed PUT URL on base.
func (t *Ticket) UploadURL(base string) string {
	return signed(base, UploadPath(t.ID), t.key, "put", t.ID, t.ExpiresAt.Unix())
}

// Redeem stores the bytes of a PUT to ticket id's upload URL (its query
// q) as the ticket's file, of the ticket's owner: ErrBadSignature for a
// URL never issued, altered, expired, or redeemed already. The content
// type is the PUT's when it names one, else the ticket's. An upload that
// fails leaves the ticket to be redeemed again.
func (s *Store) Redeem(ctx context.Context, id string, q url.Values, contentType string, body io.Reader) (*File, error) {
	if !ValidID(id) {
		return nil, ErrBadSignature
	}
	info, err := s.obs.GetInfo(ctx, ticketObject(id))
	switch {
	case errors.Is(err, jetstream.ErrObjectNotFound):
		return nil, ErrBadSignature
	case err != nil:
		return nil, fmt.Errorf("reading upload %s: %w", id, err)
	}
	key, _ := hex.DecodeString(info.Metadata[metaKey])
	if err := verify(key, "put", id, q, s.cfg.Now()); err != nil {
		return nil, err
	}
	if _, err := s.obs.GetInfo(ctx, fileObject(id)); err == nil {
		return nil, ErrBadSignature // redeemed, its ticket's removal lost
	}
	if contentType == "" {
		contentType = info.Metadata[metaType]
	}
	f, err := s.put(ctx, id, Upload{Owner: info.Metadata[metaOwner], Name: info.Metadata[metaName], ContentType: contentType, Body: body})
	if err != nil {
		return nil, err
	}
	if err := s.obs.Delete(context.WithoutCancel(ctx), ticketObject(id)); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("closing upload %s: %w", id, err)
	}
	return f, nil
}
