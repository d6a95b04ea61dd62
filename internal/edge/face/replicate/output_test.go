package replicate_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/state"
)

// get sends a GET to the face without following a redirect.
func get(t *testing.T, srv *httptest.Server, path string) (*answer, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/replicate/"+route+path, nil)
	require.NoError(t, err)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return &answer{StatusCode: resp.StatusCode, Header: resp.Header}, string(b)
}

// A succeeded prediction's output is Pollux's own URL for an output the
// route keeps — it serves the kept bytes, or sends the app to the
// provider's until custody has copied them — and the provider's URL
// otherwise; an unsafe URL is never handed on.
func TestOutputsAreKeptOrTheProviders(t *testing.T) {
	t.Parallel()
	p, srv := setup(t)
	p.KeepOutputs(route)
	p.Put(&state.Job{ID: "kept", Route: route, State: state.Succeeded, Metadata: made,
		Outputs: []string{"https://cdn.example/a.mp4", "https://cdn.example/b.mp4"},
		Custody: &state.Custody{SavedAt: time.Now(), Outputs: []state.SavedOutput{
			{Index: 0, Status: state.OutputSaved, Object: "kept/0", ContentType: "video/mp4"}, {Index: 1, Status: state.OutputGone}}}})
	p.Put(&state.Job{ID: "copying", Route: route, State: state.Succeeded, Metadata: made, Outputs: []string{"https://cdn.example/c.mp4"}})
	self := srv.URL + "/replicate/" + route + "/outputs/"

	_, body := do(t, srv, http.MethodGet, "/v1/predictions/kept", "", nil)
	require.Equal(t, []any{self + "kept/0", "https://cdn.example/b.mp4"}, decode(t, body).Output,
		"the kept output on the face; the one custody found gone, the provider's")
	resp, body := get(t, srv, "/outputs/kept/0")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "kept kept/0", body, "the kept bytes")
	require.Equal(t, "video/mp4", resp.Header.Get("Content-Type"))

	_, body = do(t, srv, http.MethodGet, "/v1/predictions/copying", "", nil)
	require.Equal(t, self+"copying/0", decode(t, body).Output, "kept once custody has copied it: the link stays")
	resp, body = get(t, srv, "/outputs/copying/0")
	require.Equal(t, http.StatusFound, resp.StatusCode, body)
	require.Equal(t, "https://cdn.example/c.mp4", resp.Header.Get("Location"), "the provider's until then")

	for _, path := range []string{"/outputs/kept/2", "/outputs/kept/x", "/outputs/kept/01", "/outputs/nope/0"} {
		resp, body := get(t, srv, path)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), "%s: %s", path, body)
	}

	// A route that keeps no outputs: the provider's URLs, the safe ones.
	p, srv = setup(t)
	p.Put(&state.Job{ID: "unsafe", Route: route, State: state.Succeeded, Metadata: made,
		Outputs: []string{"javascript:alert(1)", "https://cdn.example/ok.mp4"}})
	p.Put(&state.Job{ID: "none", Route: route, State: state.Succeeded, Metadata: made, Outputs: []string{"file:///etc/passwd"}})
	_, body = do(t, srv, http.MethodGet, "/v1/predictions/unsafe", "", nil)
	require.Equal(t, "https://cdn.example/ok.mp4", decode(t, body).Output)
	_, body = do(t, srv, http.MethodGet, "/v1/predictions/none", "", nil)
	require.Nil(t, decode(t, body).Output, "%s", body)
	resp, body = get(t, srv, "/outputs/unsafe/0")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "never a redirect to an unsafe URL: %s", body)
}
