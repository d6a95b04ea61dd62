package httpapi_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/httpapi"
)

// An output on the API's host is downloaded with the credentials, which
// stay behind when the download is redirected to another host; a gone
// one is NotFound; one on another host is not the client's to open.
func TestDownload(t *testing.T) {
	t.Parallel()
	storage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		_, _ = io.WriteString(w, "bytes")
	}))
	t.Cleanup(storage.Close)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Authorization") != "Bearer k":
			w.WriteHeader(http.StatusUnauthorized)
		case r.URL.Path == "/videos/v1/content":
			http.Redirect(w, r, storage.URL+"/v1.mp4", http.StatusFound)
		case r.URL.Path == "/videos/v2/content":
			_, _ = io.WriteString(w, "direct")
		default:
			w.WriteHeader(http.StatusGone)
		}
	}))
	t.Cleanup(api.Close)
	c := &httpapi.Client{BaseURL: api.URL + "/v1", Authorize: func(r *http.Request) { r.Header.Set("Authorization", "Bearer k") }}
	for path, want := range map[string]string{"/videos/v1/content": "bytes", "/videos/v2/content": "direct"} {
		body, err := c.Download(t.Context(), api.URL+path)
		require.NoError(t, err, path)
		b, err := io.ReadAll(body)
		require.NoError(t, err)
		require.NoError(t, body.Close())
		require.Equal(t, want, string(b), path)
	}
	_, err := c.Download(t.Context(), api.URL+"/videos/old/content")
	var perr *provider.Error
	require.True(t, errors.As(err, &perr), "%v", err)
	require.Equal(t, provider.NotFound, perr.Class)
	_, err = c.Download(t.Context(), strings.Replace(storage.URL, "127.0.0.1", "localhost", 1)+"/x.mp4")
	require.ErrorIs(t, err, provider.ErrUnsupported)
}
