package inputs

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/events"
)

// Defaults of Config.
const (
	DefaultTTL           = 24 * time.Hour
	DefaultMaxFileBytes  = 100 << 20
	DefaultMaxOwnerBytes = 1 << 30
	DefaultUploadURLTTL  = time.Hour
)

// Config configures a Store. Zero values mean the defaults on each field.
type Config struct {
	// TTL is how long a file is kept after its upload (default
	// DefaultTTL, 24h): the bucket's TTL.
	TTL time.Duration
	// MaxFileBytes bounds one file (default DefaultMaxFileBytes, 100 MiB).
	MaxFileBytes int64
	// MaxOwnerBytes bounds the bytes of the files one owner keeps at once
	// (default DefaultMaxOwnerBytes, 1 GiB).
	MaxOwnerBytes int64
	// MaxBytes bounds the bucket as a whole (default: no limit but the
	// server's).
	MaxBytes int64
	// UploadURLTTL is how long an upload URL (Issue) may be used
	// (default DefaultUploadURLTTL, 1h).
	UploadURLTTL time.Duration
	// Options size the bucket (replicas, storage).
	Options events.Options
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// withDefaults fills the defaults and checks the rest, naming the bad
// field.
func (c Config) withDefaults() (Config, error) {
	c.TTL = cmp.Or(c.TTL, DefaultTTL)
	c.MaxFileBytes = cmp.Or(c.MaxFileBytes, DefaultMaxFileBytes)
	c.MaxOwnerBytes = cmp.Or(c.MaxOwnerBytes, DefaultMaxOwnerBytes)
	c.UploadURLTTL = cmp.Or(c.UploadURLTTL, DefaultUploadURLTTL)
	if c.Now == nil {
		c.Now = time.Now
	}
	switch {
	case c.TTL < time.Minute:
		return c, errors.New("inputs: TTL: at least 1m")
	case c.MaxFileBytes < 0 || c.MaxOwnerBytes < 0 || c.MaxBytes < 0:
		return c, errors.New("inputs: MaxFileBytes, MaxOwnerBytes and MaxBytes must not be negative")
	case c.UploadURLTTL < 0 || c.UploadURLTTL > c.TTL:
		return c, errors.New("inputs: UploadURLTTL: between 0 and TTL")
	}
	return c, nil
}

// File is one uploaded file, as its owner sees it.
type File struct {
	// ID names the file (32 hex digits).
	ID string
	// Owner is who uploaded it: the front door's name of the token.
	Owner string
	// Name is the file name the app gave, ContentType its type.
	Name, ContentType string
	// Size is its length in bytes.
	Size int64
	// SHA256 is the hex SHA-256 of its bytes.
	SHA256 string
	// CreatedAt is when its upload ended; ExpiresAt when it goes.
	CreatedAt, ExpiresAt time.Time
	// key signs its URLs.
	key []byte
}

// Ref is the reference a job's input carries in place of the file.
func (f *File) Ref() string { return Scheme + f.ID }

// Scheme begins a reference to a file (Ref).
const Scheme = "pollux-input://"

var idRe = regexp.MustCompile(`^[0-9a-f]{32}$`)

// ValidID reports whether id has the shape of a file's id.
func ValidID(id string) bool { return idRe.MatchString(id) }

// ParseRef returns the id a reference names; ok is false for any other
// string.
func ParseRef(s string) (id string, ok bool) {
	id, ok = strings.CutPrefix(s, Scheme)
	return id, ok && ValidID(id)
}

// Metadata keys of a file's object.
const (
	metaOwner   = "owner"
	metaName    = "name"
	metaType    = "type"
	metaKey     = "key"
	metaExpires = "expires"
)

// Object names: a file's, and an upload ticket's (Issue).
func fileObject(id string) string   { return "f/" + id }
func ticketObject(id string) string { return "t/" + id }

// Store keeps the input files.
type Store struct {
	cfg Config
	obs jetstream.ObjectStore
}

// Open creates the inputs bucket of namespace ns, or finds it and updates
// its TTL, size and replicas, and returns the store over it.
func Open(ctx context.Context, js jetstream.JetStream, ns events.Namespace, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	obs, err := events.UntilFormed(ctx, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return events.EnsureObjectStore(ctx, js, ns.InputsBucketConfig(cfg.Options, cfg.TTL, cfg.MaxBytes))
	})
	if err != nil {
		return nil, err
	}
	return &Store{cfg: cfg, obs: obs}, nil
}

// Config is the store's configuration, its defaults filled.
func (s *Store) Config() Config { return s.cfg }

// Upload is one file to put.
type Upload struct {
	// Owner is who uploads it (required).
	Owner string
	// Name is the file name the app gave (optional), ContentType its type
	// (default application/octet-stream).
	Name, ContentType string
	// Body is read to its end, never held whole.
	Body io.Reader
}

// Put streams upload u into the store. An upload past a limit is a
// *TooLargeError, one of no bytes ErrEmpty; a failed or interrupted one
// (Body's error, ctx ending) leaves nothing behind that Get finds.
func (s *Store) Put(ctx context.Context, u Upload) (*File, error) {
	return s.put(ctx, newID(), u)
}

func (s *Store) put(ctx context.Context, id string, u Upload) (*File, error) {
	if u.Owner == "" {
		return nil, errors.New("inputs: an upload needs an owner")
	}
	used, err := s.usage(ctx, u.Owner)
	if err != nil {
		return nil, err
	}
	room := s.cfg.MaxOwnerBytes - used
	if room <= 0 {
		return nil, &TooLargeError{Limit: s.cfg.MaxOwnerBytes, Owner: true}
	}
	limit, tooLarge := s.cfg.MaxFileBytes, &TooLargeError{Limit: s.cfg.MaxFileBytes}
	if room < limit {
		limit, tooLarge = room, &TooLargeError{Limit: s.cfg.MaxOwnerBytes, Owner: true}
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	meta := jetstream.ObjectMeta{Name: fileObject(id), Metadata: map[string]string{
		metaOwner: u.Owner, metaName: bound(u.Name, 255), metaType: mediaType(u.ContentType),
		metaKey: hex.EncodeToString(key),
	}}
	body := &limited{r: u.Body, left: limit, err: tooLarge}
	info, err := s.obs.Put(ctx, meta, filling{body})
	if err != nil {
		if body.over {
			return nil, tooLarge
		}
		return nil, fmt.Errorf("storing the file: %w", err)
	}
	if info.Size == 0 {
		_ = s.obs.Delete(context.WithoutCancel(ctx), meta.Name)
		return nil, ErrEmpty
	}
	// Uploads of one owner running at once each saw room for itself: the
	// owner's limit holds once they are all in.
	if used, err = s.usage(ctx, u.Owner); err == nil && used > s.cfg.MaxOwnerBytes {
		_ = s.obs.Delete(context.WithoutCancel(ctx), meta.Name)
		return nil, &TooLargeError{Limit: s.cfg.MaxOwnerBytes, Owner: true}
	}
	info.ModTime = s.cfg.Now()
	return s.file(info), nil
}

// mediaType is a content type's media type alone (no parameters), as a
// data: URI may carry it; application/octet-stream for one that does not
// parse.
func mediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || len(mt) > 127 {
		return "application/octet-stream"
	}
	return mt
}

// bound cuts s to at most n bytes.
func bound(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// limited reads r, failing with err past left bytes.
type limited struct {
	r    io.Reader
	left int64
	err  error
	over bool
}

func (l *limited) Read(p []byte) (int, error) {
	if l.left < 0 {
		l.over = true
		return 0, l.err
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		l.over = true
		return 0, l.err
	}
	return n, err
}

// filling reads r until p is full (or r ends): the object store makes a
// chunk of each Read, and a body read a few KiB at a time (a multipart
// part) would make thousands of small chunks, more than the publishes it
// keeps in flight (its Put then fails: "stalled with too many outstanding
// async published messages").
type filling struct{ r io.Reader }

func (f filling) Read(p []byte) (int, error) {
	n, err := io.ReadFull(f.r, p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF
	}
	return n, err
}

// newID is a fresh file id.
func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// file is the File of an object's info.
func (s *Store) file(info *jetstream.ObjectInfo) *File {
	f := &File{
		ID: strings.TrimPrefix(info.Name, "f/"), Owner: info.Metadata[metaOwner], Name: info.Metadata[metaName],
		ContentType: info.Metadata[metaType], Size: int64(info.Size), CreatedAt: info.ModTime.UTC(),
		ExpiresAt: info.ModTime.Add(s.cfg.TTL).UTC(),
	}
	f.key, _ = hex.DecodeString(info.Metadata[metaKey])
	if d, ok := strings.CutPrefix(info.Digest, "SHA-256="); ok {
		if b, err := base64.URLEncoding.DecodeString(d); err == nil {
			f.SHA256 = hex.EncodeToString(b)
		}
	}
	return f
}

// usage is the bytes owner's files take.
func (s *Store) usage(ctx context.Context, owner string) (int64, error) {
	files, err := s.List(ctx, owner)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, f := range files {
		n += f.Size
	}
	return n, nil
}

// Get is owner's file id; ErrNotFound when there is none of owner's.
func (s *Store) Get(ctx context.Context, owner, id string) (*File, error) {
	f, err := s.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if f.Owner != owner {
		return nil, ErrNotFound
	}
	return f, nil
}

// lookup is file id, whoever owns it.
func (s *Store) lookup(ctx context.Context, id string) (*File, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	info, err := s.obs.GetInfo(ctx, fileObject(id))
	switch {
	case errors.Is(err, jetstream.ErrObjectNotFound):
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("reading file %s: %w", id, err)
	}
	f := s.file(info)
	if !s.cfg.Now().Before(f.ExpiresAt) {
		return nil, ErrNotFound
	}
	return f, nil
}

// List is owner's files, oldest first. It reads every file's meta in the
// bucket: as many as the TTL keeps.
func (s *Store) List(ctx context.Context, owner string) ([]*File, error) {
	infos, err := s.obs.List(ctx)
	switch {
	case errors.Is(err, jetstream.ErrNoObjectsFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("listing the files: %w", err)
	}
	var out []*File
	now := s.cfg.Now()
	for _, info := range infos {
		if !strings.HasPrefix(info.Name, "f/") || info.Metadata[metaOwner] != owner {
			continue
		}
		if f := s.file(info); now.Before(f.ExpiresAt) {
			out = append(out, f)
		}
	}
	return out, nil
}

// Delete deletes owner's file id; ErrNotFound when there is none of
// owner's. Every URL to it stops working.
func (s *Store) Delete(ctx context.Context, owner, id string) error {
	if _, err := s.Get(ctx, owner, id); err != nil {
		return err
	}
	if err := s.obs.Delete(ctx, fileObject(id)); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("deleting file %s: %w", id, err)
	}
	return nil
}
