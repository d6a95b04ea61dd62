package frontdoor_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/pkg/state"
)

// The genai face's files.download of an output Pollux keeps no copy of
// answers the provider's bytes, never a redirect: @google/genai sends the
// app's Pollux token as x-goog-api-key, which fetch carries across a
// cross-origin redirect, so a redirect would hand the token to the
// provider's CDN. The provider, on another origin, sees no credential.
// The proxy follows no redirect, refuses loopback unless the route allows
// it, and refuses an output over max_bytes.
func TestProxiedDownloadsNeverRedirect(t *testing.T) {
	t.Parallel()
	const video = "the video's bytes, on another origin"
	var mu sync.Mutex
	var creds []string
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		creds = append(creds, r.Header.Get("X-Goog-Api-Key")+r.Header.Get("Authorization"))
		mu.Unlock()
		switch r.URL.Path {
		case "/v.mp4":
			w.Header().Set("Content-Type", "video/mp4")
			_, _ = io.WriteString(w, video)
		case "/elsewhere":
			http.Redirect(w, r, "https://cdn.example/v.mp4", http.StatusFound)
		case "/big":
			w.(http.Flusher).Flush() // chunked: no length announced
			_, _ = io.WriteString(w, strings.Repeat("x", 100))
		case "/announced":
			_, _ = io.WriteString(w, strings.Repeat("x", 100)) // with its Content-Length
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(provider.Close)
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenA + " read app=team\n"))
	require.NoError(t, err)
	allowing := frontdoor.NewOutputProxy(config.OutputProxy{AllowPrivate: true, MaxBytes: 64})
	d := setup(t, frontdoor.Config{Tokens: tokens, Faces: []face.Mount{{Kind: face.GenAI, Route: route}, {Kind: face.GenAI, Route: "other"}},
		Routes: []string{route, "other"}, OutputProxies: map[string]frontdoor.OutputProxy{route: allowing}})
	require.True(t, face.Proxied(face.GenAI))

	id, strict := face.Base32.EncodeToString([]byte("proxied output 1")), face.Base32.EncodeToString([]byte("proxied output 2"))
	now := time.Now().UTC()
	d.storeJob(t, &state.Job{ID: id, Route: route, Model: "veo", State: state.Succeeded, CreatedAt: now, CompletedAt: now,
		Metadata: map[string]string{face.MetaFace: string(face.GenAI), "genai_model": "veo"},
		Outputs:  []string{provider.URL + "/v.mp4", provider.URL + "/elsewhere", provider.URL + "/gone", provider.URL + "/big", provider.URL + "/announced"}})
	d.storeJob(t, &state.Job{ID: strict, Route: "other", Model: "veo", State: state.Succeeded, CreatedAt: now, CompletedAt: now,
		Metadata: map[string]string{face.MetaFace: string(face.GenAI), "genai_model": "veo"}, Outputs: []string{provider.URL + "/v.mp4"}})

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	type answer struct {
		StatusCode int
		Header     http.Header
	}
	download := func(r, id string, n int) (answer, string, error) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, fmt.Sprintf("%s/genai/%s/v1beta/files/%s%d:download?alt=media", d.url, r, id, n), nil)
		require.NoError(t, err)
		req.Header.Set("X-Goog-Api-Key", tokenA)
		resp, err := noRedirect.Do(req)
		if err != nil {
			return answer{}, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header}, string(body), err
	}

	resp, body, err := download(route, id, 0)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the bytes, not a %d: %s", resp.StatusCode, body)
	require.Equal(t, video, body)
	require.Equal(t, "video/mp4", resp.Header.Get("Content-Type"))
	require.Empty(t, resp.Header.Get("Location"))

	resp, body, err = download(route, id, 1)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadGateway, resp.StatusCode, "a provider's redirect is not followed, nor passed on: %s", body)
	require.Contains(t, body, "HTTP 302")
	require.Empty(t, resp.Header.Get("Location"))

	resp, body, err = download(route, id, 2)
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "gone at the provider: %s", body)

	_, _, err = download(route, id, 3)
	require.Error(t, err, "an output over max_bytes whose length was not announced is cut off, the connection closed")
	resp, body, err = download(route, id, 4)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadGateway, resp.StatusCode, "an announced length over max_bytes: %s", body)
	require.Contains(t, body, "max_bytes")

	resp, body, err = download("other", strict, 0)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadGateway, resp.StatusCode, "a route that does not allow private addresses: %s", body)
	require.Contains(t, body, "loopback")

	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(creds), 5, "the provider was called for each output the proxy fetched")
	for _, c := range creds {
		require.Empty(t, c, "no credential reaches the provider")
	}
}
