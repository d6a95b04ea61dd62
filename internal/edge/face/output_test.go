package face_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/face/facetest"
	"github.com/pollux-dev/pollux/pkg/state"
)

// A provider's output URL is handed on only when it is http(s) with a
// host and no userinfo.
func TestProviderURL(t *testing.T) {
	t.Parallel()
	for raw, ok := range map[string]bool{
		"https://cdn.example/a/out.mp4?sig=1": true,
		"http://cdn.example:8080/out.mp4":     true,
		"javascript:alert(1)":                 false,
		"data:video/mp4;base64,AAAA":          false,
		"file:///etc/passwd":                  false,
		"ftp://cdn.example/out.mp4":           false,
		"//cdn.example/out.mp4":               false,
		"https:///out.mp4":                    false,
		"https://user:pw@cdn.example/out.mp4": false,
		"https://cdn.example/\x00":            false,
		"":                                    false,
	} {
		j := &state.Job{Outputs: []string{raw}}
		u, err := face.ProviderURL(j, 0)
		if ok {
			require.NoError(t, err, raw)
			require.Equal(t, raw, u)
		} else {
			require.ErrorIs(t, err, face.ErrOutputNotFound, raw)
		}
	}
	_, err := face.ProviderURL(&state.Job{Outputs: []string{"https://a/b"}}, 1)
	require.ErrorIs(t, err, face.ErrOutputNotFound)
	_, err = face.ProviderURL(&state.Job{Outputs: []string{"https://a/b"}}, -1)
	require.ErrorIs(t, err, face.ErrOutputNotFound)
}

// A face links a kept output to itself, on the request's own base; any
// other to the provider's URL when it is safe, and to nothing otherwise.
func TestOutputURL(t *testing.T) {
	t.Parallel()
	p := facetest.New()
	p.KeepOutputs("keeps")
	k := face.NewKit(face.Mount{Kind: face.Replicate, Route: "sim", Prefix: "/replicate/sim"}, p, shape{})
	r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/v1/predictions/x", nil)
	r.Host = "pollux.example:8443"
	r.Header.Set("X-Forwarded-Proto", "https")
	j := &state.Job{ID: "j1", Route: "keeps", State: state.Succeeded, Outputs: []string{"https://cdn.example/out.mp4", "javascript:alert(1)"}}
	u, ok := k.OutputURL(r, j, 0)
	require.True(t, ok)
	require.Equal(t, "https://pollux.example:8443/replicate/sim/outputs/j1/0", u)
	require.Equal(t, []string{"https://pollux.example:8443/replicate/sim/outputs/j1/0", "https://pollux.example:8443/replicate/sim/outputs/j1/1"},
		k.OutputURLs(r, j), "a kept output's URL is Pollux's, whatever the provider's was")

	j.Route = "elsewhere"
	u, ok = k.OutputURL(r, j, 0)
	require.True(t, ok)
	require.Equal(t, "https://cdn.example/out.mp4", u)
	_, ok = k.OutputURL(r, j, 1)
	require.False(t, ok, "an unsafe URL is never handed on")
	require.Equal(t, []string{"https://cdn.example/out.mp4"}, k.OutputURLs(r, j))
}
