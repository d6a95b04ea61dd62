package fal

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/face/facetest"
)

const route = "sim"

// setup is the fal face over an in-memory Pollux, waiting at most grace for
// a record.
func setup(t *testing.T) (*Face, *facetest.Pollux) {
	t.Helper()
	p := facetest.New()
	f := New(face.Mount{Kind: face.Fal, Route: route, Prefix: face.Prefix(face.Fal, route), RecordGrace: 50 * time.Millisecond}, p).(*Face)
	return f, p
}

type reply struct {
	status int
	header http.Header
	raw    string
	body   map[string]any
}

// call sends a request to the proxy with target as its x-fal-target-url.
func call(t *testing.T, f *Face, method, target, body string, hdr ...string) reply {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, "/", strings.NewReader(body))
	if target != "" {
		req.Header.Set(TargetHeader, target)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	f.Handler().ServeHTTP(rec, req)
	r := reply{status: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"), "every answer is JSON: %s", r.raw)
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r.body), r.raw)
	return r
}

const queue = "https://queue.fal.run/"

// submit submits input to endpoint and returns the request id.
func submit(t *testing.T, f *Face, endpoint, input string, hdr ...string) string {
	t.Helper()
	r := call(t, f, http.MethodPost, queue+endpoint, input, hdr...)
	require.Equal(t, http.StatusOK, r.status, r.raw)
	return r.body["request_id"].(string)
}
