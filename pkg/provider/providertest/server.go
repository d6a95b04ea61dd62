package providertest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Reply is one canned answer.
type Reply struct {
	// Status is the HTTP status (200 when 0).
	Status int
	// Header is added to the answer's headers.
	Header http.Header
	// Body is the answer's body.
	Body []byte
}

// OK is a 200 answer with body.
func OK(body []byte) Reply { return Reply{Status: http.StatusOK, Body: body} }

// Request is one request the fake saw.
type Request struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
}

// Key is the request's "METHOD /path", as Server's table names it.
func (r Request) Key() string { return r.Method + " " + r.Path }

// Server is a scripted fake of a provider's HTTP API. It answers each
// request by its "METHOD /path" from a table, "*" standing for any request
// the table does not name, and an unlisted request with a 500; it records
// every request it saw. The table may change between calls. It is closed
// when the test ends.
type Server struct {
	*httptest.Server
	mu       sync.Mutex
	routes   map[string]func(*http.Request) Reply
	requests []Request
	done     chan struct{}
}

// NewServer starts a plain-HTTP fake answering from replies.
func NewServer(t testing.TB, replies map[string]Reply) *Server {
	return start(t, replies, httptest.NewServer)
}

// NewTLSServer starts a TLS fake answering from replies; adapters reach it
// with its Client().
func NewTLSServer(t testing.TB, replies map[string]Reply) *Server {
	return start(t, replies, httptest.NewTLSServer)
}

func start(t testing.TB, replies map[string]Reply, listen func(http.Handler) *httptest.Server) *Server {
	t.Helper()
	s := &Server{routes: map[string]func(*http.Request) Reply{}, done: make(chan struct{})}
	for k, r := range replies {
		s.Set(k, r)
	}
	s.Server = listen(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		close(s.done) // release hung requests, or Close would wait for them
		s.Close()
	})
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	seen := Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	s.mu.Lock()
	s.requests = append(s.requests, seen)
	h, ok := s.routes[seen.Key()]
	if !ok {
		h, ok = s.routes["*"]
	}
	s.mu.Unlock()
	rep := Reply{Status: http.StatusInternalServerError, Body: []byte(`{"error":"unexpected request ` + seen.Key() + `"}`)}
	if ok {
		rep = h(r)
	}
	for k, v := range rep.Header {
		w.Header()[k] = v
	}
	if rep.Status == 0 {
		rep.Status = http.StatusOK
	}
	w.WriteHeader(rep.Status)
	_, _ = w.Write(rep.Body)
}

// Set answers requests to key ("METHOD /path", or "*") with r.
func (s *Server) Set(key string, r Reply) {
	s.HandleFunc(key, func(*http.Request) Reply { return r })
}

// HandleFunc answers requests to key ("METHOD /path", or "*") with what h
// returns, for answers that depend on the request or change call by call.
func (s *Server) HandleFunc(key string, h func(*http.Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes[key] = h
}

// Hang leaves requests to key unanswered until the caller gives up or the
// test ends: a provider that does not answer.
func (s *Server) Hang(key string) {
	s.HandleFunc(key, func(r *http.Request) Reply {
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return Reply{Status: http.StatusGatewayTimeout}
	})
}

// Requests returns the requests seen so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Last returns the latest request seen; the zero Request when none was.
func (s *Server) Last() Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return Request{}
	}
	return s.requests[len(s.requests)-1]
}

// Count returns how many requests had key's method and path.
func (s *Server) Count(key string) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Key() == key {
			n++
		}
	}
	return n
}
