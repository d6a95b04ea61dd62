package inputs

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/pkg/provider"
)

// RefError refuses an input's reference: the field that holds it (a JSON
// path such as input.image or input.frames[1]) and why.
type RefError struct {
	Field string
	Err   error
}

func (e *RefError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *RefError) Unwrap() error { return e.Err }

// maxDepth bounds how deep Walk looks into an input.
const maxDepth = 32

// Walk calls fn with each string of JSON value v and its path below root
// (root.a.b[2]; a.b[2] when root is ""), replacing it with what fn returns; it stops at fn's
// first error. v is decoded with its numbers kept as written.
func Walk(v json.RawMessage, root string, fn func(path, s string) (string, error)) (json.RawMessage, error) {
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return nil, fmt.Errorf("%s: not JSON: %w", root, err)
	}
	x, err := walk(x, root, 0, fn)
	if err != nil {
		return nil, err
	}
	return json.Marshal(x)
}

func walk(x any, path string, depth int, fn func(path, s string) (string, error)) (any, error) {
	if depth > maxDepth {
		return x, nil
	}
	switch v := x.(type) {
	case string:
		return fn(path, v)
	case map[string]any:
		for k, e := range v {
			next := k
			if path != "" {
				next = path + "." + k
			}
			n, err := walk(e, next, depth+1, fn)
			if err != nil {
				return nil, err
			}
			v[k] = n
		}
	case []any:
		for i, e := range v {
			n, err := walk(e, path+"["+strconv.Itoa(i)+"]", depth+1, fn)
			if err != nil {
				return nil, err
			}
			v[i] = n
		}
	}
	return x, nil
}

// HasRefs reports whether input may name a file (a quick look before
// Walk).
func HasRefs(input []byte) bool { return bytes.Contains(input, []byte(Scheme)) }

// Check checks every reference input carries (below root, for the
// field names of its errors): each must name a file of owner's that
// lives at least minLife more. A *RefError names the first that does not.
func (s *Store) Check(ctx context.Context, owner string, input json.RawMessage, root string) error {
	if !HasRefs(input) {
		return nil
	}
	_, err := Walk(input, root, func(path, v string) (string, error) {
		if !strings.HasPrefix(v, Scheme) {
			return v, nil
		}
		id, ok := ParseRef(v)
		if !ok {
			return "", &RefError{Field: path, Err: errors.New("not a file reference (" + Scheme + "<32 hex digits>)")}
		}
		f, err := s.Get(ctx, owner, id)
		switch {
		case errors.Is(err, ErrNotFound):
			return "", &RefError{Field: path, Err: fmt.Errorf("no file %s (unknown, expired or deleted)", id)}
		case err != nil:
			return "", err
		case f.ExpiresAt.Sub(s.cfg.Now()) < s.minLife():
			return "", &RefError{Field: path, Err: fmt.Errorf("file %s expires in less than %s: upload it again", id, s.minLife())}
		}
		return v, nil
	})
	return err
}

// minLife is the least life a file named by a create must have left:
// enough for the provider to fetch it (a tenth of the TTL, at most 1h).
func (s *Store) minLife() time.Duration { return min(s.cfg.TTL/10, time.Hour) }

// Delivery is how a route's provider is given the files its jobs' inputs
// name (config.Inputs, docs/providers.md).
type Delivery struct {
	// PublicURL is the front door's base URL as the provider reaches it:
	// a file goes as a signed URL on it (Store.URL). "": no URLs.
	PublicURL string
	// InlineMaxBytes: a file of at most this many bytes goes inline, as a
	// data: URI of its bytes (0: never).
	InlineMaxBytes int64
}

// Deliver is input with each reference it carries replaced by what
// delivery d gives the provider: the file inline when it is small enough,
// else its signed URL. A file gone, or one no way of d can deliver, is a
// *RefError.
func (s *Store) Deliver(ctx context.Context, input json.RawMessage, d Delivery) (json.RawMessage, error) {
	if !HasRefs(input) {
		return input, nil
	}
	return Walk(input, "input", func(path, v string) (string, error) {
		id, ok := ParseRef(v)
		if !ok {
			return v, nil
		}
		f, err := s.lookup(ctx, id)
		switch {
		case errors.Is(err, ErrNotFound):
			return "", &RefError{Field: path, Err: fmt.Errorf("file %s is gone (expired or deleted) before the provider was given it", id)}
		case err != nil:
			return "", err
		case f.Size <= d.InlineMaxBytes:
			return s.inline(ctx, f)
		case d.PublicURL != "":
			return s.URL(d.PublicURL, f), nil
		}
		return "", &RefError{Field: path, Err: fmt.Errorf("file %s (%d bytes) is larger than the route sends inline (%d) and no public URL is configured (inputs.public_url)", id, f.Size, d.InlineMaxBytes)}
	})
}

// inline is file f as a data: URI.
func (s *Store) inline(ctx context.Context, f *File) (string, error) {
	r, err := s.obs.Get(ctx, fileObject(f.ID))
	if err != nil {
		return "", fmt.Errorf("reading file %s: %w", f.ID, err)
	}
	defer r.Close()
	var b strings.Builder
	b.WriteString("data:" + f.ContentType + ";base64,")
	enc := base64.NewEncoder(base64.StdEncoding, &b)
	if _, err := io.Copy(enc, r); err != nil {
		return "", fmt.Errorf("reading file %s: %w", f.ID, err)
	}
	_ = enc.Close()
	return b.String(), nil
}

// Deliverer is Deliver with d for a route's gate (route.Route.Inputs):
// its errors are *provider.Error values — a file gone, or one d cannot
// deliver, is Invalid (the job fails, its reason naming the field);
// anything else (the bucket unreadable) Transient, retried.
func (s *Store) Deliverer(d Delivery) func(ctx context.Context, input json.RawMessage) (json.RawMessage, error) {
	return func(ctx context.Context, input json.RawMessage) (json.RawMessage, error) {
		out, err := s.Deliver(ctx, input, d)
		var re *RefError
		switch {
		case err == nil:
			return out, nil
		case errors.As(err, &re):
			return nil, &provider.Error{Class: provider.Invalid, Message: err.Error(), Err: err}
		}
		return nil, &provider.Error{Class: provider.Transient, Message: "reading the job's input files failed", Err: err}
	}
}
