package replicate_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/face/facetest"
	"github.com/pollux-dev/pollux/internal/edge/face/replicate"
)

const route = "sim"

// made is the metadata of a prediction the face made (face.Kit.Job shows
// the face no other).
var made = map[string]string{face.MetaFace: string(face.Replicate)}

// setup serves the face of route over an in-memory Pollux.
func setup(t *testing.T) (*facetest.Pollux, *httptest.Server) {
	t.Helper()
	return setupWith(t, replicate.New)
}

func setupWith(t *testing.T, build face.New) (*facetest.Pollux, *httptest.Server) {
	t.Helper()
	p := facetest.New()
	m := face.Mount{Kind: face.Replicate, Route: route, Prefix: face.Prefix(face.Replicate, route), Logger: zerolog.Nop(), RecordGrace: 50 * time.Millisecond}
	f := build(m, p)
	srv := httptest.NewServer(http.StripPrefix(m.Prefix, f.Handler()))
	t.Cleanup(srv.Close)
	return p, srv
}

// answer is a response's status and headers.
type answer struct {
	StatusCode int
	Header     http.Header
}

// do sends a request to the face and returns the response and its body.
func do(t *testing.T, srv *httptest.Server, method, path, body string, h map[string]string) (*answer, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+"/replicate/"+route+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &answer{StatusCode: resp.StatusCode, Header: resp.Header}, string(b)
}
