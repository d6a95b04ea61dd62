package frontdoor_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
)

// observed is one request a front door's Metrics saw.
type observed struct {
	handler, method string
	code            int
}

// Every request is observed once it is answered, refusals included, named
// by the pattern that serves it — never by what the request chose: its
// path's ids, an unknown method.
func TestRequestsAreObserved(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []observed
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenAlice + " act name=alice\n"))
	require.NoError(t, err)
	cfg := frontdoor.Config{Tokens: tokens, Faces: []face.Mount{{Kind: face.Replicate, Route: route}}, FaceBuilders: probeBuilders(),
		Metrics: frontdoor.Metrics{Request: func(handler, method string, code int, d time.Duration) {
			require.GreaterOrEqual(t, d, time.Duration(0))
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, observed{handler, method, code})
		}}}
	d := setup(t, cfg)
	auth := map[string]string{"Authorization": "Bearer " + tokenAlice}

	d.do(t, http.MethodGet, "/v1/jobs/some-job-id", "", auth)
	d.do(t, http.MethodGet, "/v1/jobs/another-id", "", nil)
	d.do(t, "BREW", "/v1/jobs/x", "", auth)
	d.do(t, http.MethodGet, "/no/such/path", "", auth)
	d.do(t, http.MethodPost, "/replicate/sim/create", "", auth)

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []observed{
		{"/v1/jobs/{id}", "GET", http.StatusNotFound},
		{"/v1/jobs/{id}", "GET", http.StatusUnauthorized},
		{"/v1/jobs/{id}", "other", http.StatusMethodNotAllowed},
		{"/", "GET", http.StatusNotFound},
		{"/replicate/sim/", "POST", http.StatusOK},
	}, seen)
}
