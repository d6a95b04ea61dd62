package frontdoor

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/platform/safehttp"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Outputs a face serves through the front door (face.Proxied: the faces
// whose SDK downloads with the app's key, which a redirect would carry to
// the provider's origin) and Pollux keeps no copy of are fetched from the
// provider's URL and streamed to the app: with the safe HTTP client
// output custody uses (safehttp: no credential forwarded, no redirect
// followed, private addresses refused unless the route allows them), the
// route's output_proxy bounding the size and the time.

// OutputProxy is how the front door fetches one route's outputs it
// serves through itself.
type OutputProxy struct {
	// Client fetches them (safehttp.Client).
	Client *http.Client
	// MaxBytes is the largest output served; a larger one is refused, or
	// cut short (the connection closed) when its size was not announced.
	MaxBytes int64
}

// NewOutputProxy is the proxy a route's output_proxy configures.
func NewOutputProxy(c config.OutputProxy) OutputProxy {
	c = c.WithDefaults()
	return OutputProxy{Client: safehttp.Client(c.Timeout, c.AllowPrivate), MaxBytes: c.MaxBytes}
}

// proxyFor is the proxy of route: Config.OutputProxies', else the
// defaults (private addresses refused).
func (s *Server) proxyFor(route string) OutputProxy {
	if p, ok := s.cfg.OutputProxies[route]; ok && p.Client != nil {
		return p
	}
	s.proxyOnce.Do(func() { s.proxy = NewOutputProxy(config.OutputProxy{}) })
	return s.proxy
}

// proxyOutput streams output n of job j from the provider's URL
// (face.ProviderURL) to w. The provider's 404 or 410 is
// face.ErrOutputNotFound; a refused address, a failed call, any other
// answer (a redirect included) or an output over the route's max_bytes is
// a 502 naming why, with nothing written.
func (s *Server) proxyOutput(w http.ResponseWriter, r *http.Request, j *state.Job, n int) error {
	u, err := face.ProviderURL(j, n)
	if err != nil {
		return err
	}
	p := s.proxyFor(j.Route)
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u, nil)
	if err != nil {
		return badOutput(j, n, "its URL: "+safehttp.TrimURLError(err))
	}
	req.Header.Set("User-Agent", "Pollux-FrontDoor/1")
	resp, err := p.Client.Do(req)
	if err != nil {
		var refused *safehttp.RefusedError
		if errors.As(err, &refused) {
			return badOutput(j, n, refused.Error()+"; the route's output_proxy.allow_private")
		}
		return badOutput(j, n, "fetching it: "+safehttp.TrimURLError(err))
	}
	defer func() { _ = resp.Body.Close() }()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return fmt.Errorf("the provider answered HTTP %d: %w", resp.StatusCode, face.ErrOutputNotFound)
	case resp.StatusCode != http.StatusOK:
		return badOutput(j, n, "the provider answered HTTP "+strconv.Itoa(resp.StatusCode))
	case resp.ContentLength > p.MaxBytes:
		return badOutput(j, n, fmt.Sprintf("%d bytes, more than the route's output_proxy.max_bytes %d", resp.ContentLength, p.MaxBytes))
	}
	h := w.Header()
	h.Set("Content-Type", cmp.Or(resp.Header.Get("Content-Type"), "application/octet-stream"))
	if resp.ContentLength >= 0 {
		h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	h.Set("Cache-Control", "private, no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	buf := make([]byte, 128<<10)
	var sent int64
	for {
		k, rerr := resp.Body.Read(buf)
		if sent += int64(k); sent > p.MaxBytes {
			rerr = fmt.Errorf("more than the route's output_proxy.max_bytes %d", p.MaxBytes)
		} else if k > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
			if _, err := w.Write(buf[:k]); err != nil {
				return nil // the client went away
			}
		}
		switch {
		case errors.Is(rerr, io.EOF):
			return nil
		case rerr != nil:
			// Headers are out: the connection is closed mid-body, so the
			// client sees the download fail rather than a short file
			// that looks whole (the length may not have been announced).
			s.log.Warn().Err(rerr).Str(logkey.JobID, j.ID).Int(logkey.Output, n).Msg("proxying an output failed mid-way")
			panic(http.ErrAbortHandler)
		}
	}
}

// badOutput is the 502 of an output the front door could not fetch.
func badOutput(j *state.Job, n int, why string) *face.Error {
	return &face.Error{Status: http.StatusBadGateway, Code: "output_unavailable",
		Message: fmt.Sprintf("output %d of job %s could not be served from its provider: %s", n, j.ID, why)}
}
