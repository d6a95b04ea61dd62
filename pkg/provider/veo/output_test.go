package veo_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/veo"
)

// A generated video is downloaded with the API key on the API's host, and
// without it on the storage host the download is redirected to; a video
// gone is a NotFound error; an output on another host is not the
// adapter's to open (custody fetches it as any URL).
func TestOpenOutput(t *testing.T) {
	t.Parallel()
	storage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("x-goog-api-key") != "" {
			http.Error(w, "the key leaked", http.StatusTeapot)
			return
		}
		_, _ = io.WriteString(w, "the video")
	}))
	t.Cleanup(storage.Close)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("x-goog-api-key") != "k":
			w.WriteHeader(http.StatusForbidden)
		case r.URL.Path == "/v1beta/files/abc:download":
			http.Redirect(w, r, storage.URL+"/blob/abc", http.StatusFound)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(api.Close)
	a, err := veo.NewAdapter(provider.Config{Route: "veo", Kind: veo.Kind, BaseURL: api.URL, Token: "k"})
	require.NoError(t, err)

	body, err := a.OpenOutput(t.Context(), api.URL+"/v1beta/files/abc:download?alt=media")
	require.NoError(t, err)
	b, err := io.ReadAll(body)
	require.NoError(t, err)
	require.NoError(t, body.Close())
	require.Equal(t, "the video", string(b))

	_, err = a.OpenOutput(t.Context(), api.URL+"/v1beta/files/gone:download?alt=media")
	var perr *provider.Error
	require.True(t, errors.As(err, &perr), "%v", err)
	require.Equal(t, provider.NotFound, perr.Class)

	// Another host never gets the key.
	_, err = a.OpenOutput(t.Context(), strings.Replace(api.URL, "127.0.0.1", "localhost", 1)+"/v1beta/files/abc:download")
	require.ErrorIs(t, err, provider.ErrUnsupported)
}
