package frontdoor

import (
	"net/http"
	"time"
)

// Metrics observes the front door's requests; a nil hook observes nothing.
type Metrics struct {
	// Request observes one request once it is answered: the pattern
	// that serves it (a face's mount prefix for a face's request, "/" for
	// a path the front door does not serve), its method (one of the
	// standard ones, else "other"), the status answered (a refusal of the
	// Host check, token, origin or quota included) and how long it took —
	// an event stream's whole life.
	Request func(handler, method string, code int, d time.Duration)
	// OutageRead observes a face's read of a job's record that could not
	// be made (NATS unavailable): known says the front door had a record
	// of the job to answer from (face.Outage).
	OutageRead func(known bool)
	// Unconfirmed observes a submission answered 503 while its storing
	// was in doubt, once settled (see Server.settle): outcome is one of
	// the Settled constants.
	Unconfirmed func(route, outcome string)
}

// measure observes every request the front door answers — guard, its
// checks in front of mux (the Host, tokens, origin, quota), answers some
// itself — named by mux's pattern for it: few values, set by the
// configuration, never by the request. A request mux served says its
// pattern on the way out; only one guard refused is matched again.
func (s *Server) measure(mux *http.ServeMux, guard func(http.Handler) http.Handler) http.Handler {
	observe := s.cfg.Metrics.Request
	if observe == nil {
		return guard(mux)
	}
	next := guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r) // sets r.Pattern
		if sw, ok := w.(*statusWriter); ok {
			sw.pattern = r.Pattern
		}
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.pattern == "" {
			_, sw.pattern = mux.Handler(r)
		}
		observe(handlerLabel(sw.pattern), methodLabel(r.Method), sw.code(), time.Since(start))
	})
}

// handlerLabel is a pattern without its method ("GET /v1/x" and "/v1/x"
// are one handler; the method is a label of its own).
func handlerLabel(pattern string) string {
	for i := range len(pattern) {
		if pattern[i] == '/' {
			return pattern[i:]
		}
	}
	return "/"
}

// methodLabel bounds the method label: a client may send any token.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// statusWriter notes the status a handler writes; Unwrap lets
// http.ResponseController reach the connection (flushes, deadlines).
type statusWriter struct {
	http.ResponseWriter
	status int
	// pattern is the mux's pattern for the request, once mux served it.
	pattern string
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// code is the status answered (200 when the handler wrote nothing).
func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
