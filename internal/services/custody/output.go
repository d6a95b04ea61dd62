package custody

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/platform/safehttp"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

// errTooLarge: an output is larger than its route keeps.
var errTooLarge = errors.New("larger than max_bytes")

// output finds output i of job j in the bucket or copies it there, at the
// job's attempt-th pass. A failure worth retrying comes back with no
// Status and its Reason.
func (s *Service) output(ctx context.Context, j *state.Job, i int, raw string, k config.KeepOutputs, attempt int) state.SavedOutput {
	r := state.SavedOutput{Index: i, Attempts: attempt}
	name := events.OutputObject(j.ID, i)
	if info, err := s.objects.GetInfo(ctx, name); err == nil && !info.Deleted {
		return savedFrom(r, info) // kept by an earlier pass, in this process or another
	}
	ctx, cancel := context.WithTimeout(ctx, k.Timeout)
	defer cancel()
	body, ctype, size, err := s.open(ctx, j.Route, raw)
	var refused *safehttp.RefusedError
	var perr *provider.Error
	switch {
	case errors.As(err, &refused):
		r.Status, r.Reason = state.OutputFailed, refused.Error() // a configuration matter: not retried
		return r
	case errors.As(err, &perr) && perr.Class == provider.NotFound:
		r.Status, r.Reason = state.OutputGone, "deleted at the provider: "+perr.Error()
		return r
	case err != nil:
		r.Reason = err.Error()
		return r
	}
	defer func() { _ = body.Close() }()
	if size > k.MaxBytes {
		r.Status, r.Reason = state.OutputTooLarge, fmt.Sprintf("%d bytes, more than max_bytes %d: not kept", size, k.MaxBytes)
		return r
	}
	if ctype == "" {
		ctype = typeByName(raw)
	}
	meta := jetstream.ObjectMeta{
		Name:        name,
		Description: fmt.Sprintf("output %d of job %s", i, j.ID),
		Headers:     nats.Header{"Content-Type": []string{ctype}},
		Metadata:    map[string]string{"job": j.ID, "route": j.Route, "index": strconv.Itoa(i), "attempts": strconv.Itoa(attempt)},
	}
	info, err := s.objects.Put(ctx, meta, &capped{r: body, left: k.MaxBytes})
	switch {
	case errors.Is(err, errTooLarge):
		r.Status, r.Reason = state.OutputTooLarge, fmt.Sprintf("more than max_bytes %d: not kept", k.MaxBytes)
		return r
	case err != nil:
		r.Reason = "storing: " + safehttp.TrimURLError(err)
		return r
	}
	return savedFrom(r, info)
}

func savedFrom(r state.SavedOutput, info *jetstream.ObjectInfo) state.SavedOutput {
	r.Status, r.Object, r.Size, r.Digest, r.Reason = state.OutputSaved, info.Name, int64(info.Size), info.Digest, ""
	r.ContentType = info.Headers.Get("Content-Type")
	if n, err := strconv.Atoi(info.Metadata["attempts"]); err == nil {
		r.Attempts = n // kept by an earlier pass: the pass that kept it
	}
	return r
}

// open starts an output's download: through the route's adapter when it
// opens outputs itself, else a GET. size is -1 when unknown.
func (s *Service) open(ctx context.Context, route, raw string) (body io.ReadCloser, ctype string, size int64, err error) {
	if o := s.cfg.Openers[route]; o != nil {
		body, err = o.OpenOutput(ctx, raw)
		if !errors.Is(err, provider.ErrUnsupported) {
			return body, "", -1, err
		}
		// Not the adapter's to open: fetched as any URL.
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, "", 0, fmt.Errorf("output URL: %w", err)
	}
	req.Header.Set("User-Agent", "Pollux-Custody/1")
	resp, err := s.clients[route].Do(req)
	if err != nil {
		var refused *safehttp.RefusedError
		if errors.As(err, &refused) {
			return nil, "", 0, refused
		}
		return nil, "", 0, errors.New(safehttp.TrimURLError(err))
	}
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		drain(resp.Body)
		return nil, "", 0, &provider.Error{Class: provider.NotFound, HTTPStatus: resp.StatusCode}
	case resp.StatusCode/100 != 2:
		drain(resp.Body)
		return nil, "", 0, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return resp.Body, resp.Header.Get("Content-Type"), resp.ContentLength, nil
}

func drain(b io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(b, 64<<10))
	_ = b.Close()
}

// typeByName guesses an output's media type from its URL's extension.
func typeByName(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		ext := strings.ToLower(path.Ext(u.Path))
		if t := mediaTypes[ext]; t != "" {
			return t
		}
		if t := mime.TypeByExtension(ext); t != "" {
			return t
		}
	}
	return "application/octet-stream"
}

// mediaTypes are the generated media Go's own table may lack.
var mediaTypes = map[string]string{
	".mp4": "video/mp4", ".webm": "video/webm", ".mov": "video/quicktime", ".mkv": "video/x-matroska",
	".gif": "image/gif", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
	".mp3": "audio/mpeg", ".wav": "audio/wav", ".glb": "model/gltf-binary",
}

// capped reads r, failing with errTooLarge past left bytes.
type capped struct {
	r    io.Reader
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return n, errTooLarge
	}
	return n, err
}
