package frontdoor

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/state"
)

// output handles GET /v1/jobs/{id}/outputs/{n}: output n of a job, as
// output custody kept it in the outputs bucket, streamed with its media
// type, length and digest. An output not kept (not saved, gone, too
// large, or past the bucket's TTL) is answered 404 output_not_kept.
func (s *Server) output(w http.ResponseWriter, r *http.Request) *apiError {
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 0 || strconv.Itoa(n) != r.PathValue("n") {
		return fail(http.StatusBadRequest, CodeInvalidParameter, "n", "an output's index: 0, 1, 2, ...")
	}
	j, e := s.job(r.Context(), r.PathValue("id"))
	if e != nil {
		return e
	}
	return s.serveKept(w, r, j, n)
}

// serveKept writes output n of job j as output custody kept it, or the
// error that says why it cannot.
func (s *Server) serveKept(w http.ResponseWriter, r *http.Request, j *state.Job, n int) *apiError {
	var o state.SavedOutput
	switch {
	case j.Custody == nil || j.Custody.SavedAt.IsZero():
		return fail(http.StatusNotFound, CodeOutputNotKept, "", fmt.Sprintf("job %s has no kept outputs (its route keeps none, or they are being copied)", j.ID))
	case n >= len(j.Custody.Outputs):
		return fail(http.StatusNotFound, CodeOutputNotKept, "", fmt.Sprintf("job %s has %d outputs", j.ID, len(j.Custody.Outputs)))
	default:
		o = j.Custody.Outputs[n]
	}
	if o.Status != state.OutputSaved {
		return fail(http.StatusNotFound, CodeOutputNotKept, "", fmt.Sprintf("output %d of job %s was not kept: %s (%s)", n, j.ID, o.Status, o.Reason))
	}
	etag := `"` + o.Digest + `"`
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, etag) {
		w.Header().Set("ETag", etag)
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	obs, err := s.js.ObjectStore(ctx, s.ns.OutputsBucket())
	cancel()
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
		return fail(http.StatusNotFound, CodeOutputNotKept, "", "the outputs bucket does not exist")
	case err != nil:
		return s.unavailable(err, "opening the outputs bucket")
	}
	res, err := obs.Get(r.Context(), o.Object)
	switch {
	case errors.Is(err, jetstream.ErrObjectNotFound):
		return fail(http.StatusNotFound, CodeOutputNotKept, "", fmt.Sprintf("output %d of job %s is no longer kept (past the bucket's TTL)", n, j.ID))
	case err != nil:
		return s.unavailable(err, "reading output "+o.Object)
	}
	defer func() { _ = res.Close() }()
	info, err := res.Info()
	if err != nil {
		return s.unavailable(err, "reading output "+o.Object)
	}
	h := w.Header()
	h.Set("Content-Type", cmp.Or(info.Headers.Get("Content-Type"), o.ContentType, "application/octet-stream"))
	h.Set("Content-Length", strconv.FormatUint(info.Size, 10))
	h.Set("ETag", etag)
	if d, ok := strings.CutPrefix(info.Digest, "SHA-256="); ok {
		if sum, err := base64.URLEncoding.DecodeString(d); err == nil {
			h.Set("Repr-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(sum)+":")
		}
	}
	h.Set("Cache-Control", "private, max-age=3600")
	w.WriteHeader(http.StatusOK)
	// A large output takes longer than the server's write timeout: each
	// chunk gets its own.
	rc := http.NewResponseController(w)
	buf := make([]byte, 128<<10)
	for {
		k, rerr := res.Read(buf)
		if k > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
			if _, err := w.Write(buf[:k]); err != nil {
				return nil // the client went away
			}
		}
		if errors.Is(rerr, io.EOF) {
			return nil
		}
		if rerr != nil {
			// Headers are out: the body ends short of Content-Length,
			// and the server closes the connection, so the client sees
			// the download fail.
			s.log.Warn().Err(rerr).Str(logkey.JobID, j.ID).Int(logkey.Output, n).Msg("reading a kept output failed mid-way")
			return nil
		}
	}
}
