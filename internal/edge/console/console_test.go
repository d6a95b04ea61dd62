package console_test

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/console"
)

func get(t *testing.T, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	console.Handler().ServeHTTP(w, httptest.NewRequest(method, target, nil))
	return w
}

func TestHandlerServesThePageAndItsAssets(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ path, ctype, has string }{
		{"/console/", "text/html", `<script type="module" src="/console/assets/js/app.js">`},
		{"/console/index.html", "text/html", "<title>Pollux console</title>"},
		{"/console/assets/app.css", "text/css", "--accent"},
		{"/console/assets/js/app.js", "javascript", "import"},
		{"/console/assets/js/views/jobs.js", "javascript", "/v1/stream"},
	} {
		w := get(t, http.MethodGet, c.path)
		require.Equal(t, http.StatusOK, w.Code, c.path)
		require.Contains(t, w.Header().Get("Content-Type"), c.ctype, c.path)
		require.Contains(t, w.Body.String(), c.has, c.path)
		require.Contains(t, w.Header().Get("Content-Security-Policy"), "script-src 'self'", c.path)
		require.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"), c.path)
	}
}

func TestHandlerAnswersNothingElse(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"/console/session", "/console/login", "/console/assets/", "/console/assets/nope.js", "/console/../v1/jobs", "/elsewhere"} {
		require.Equal(t, http.StatusNotFound, get(t, http.MethodGet, p).Code, p)
	}
	w := get(t, http.MethodPost, "/console/")
	require.Equal(t, http.StatusMethodNotAllowed, w.Code)
	require.Equal(t, "GET, HEAD", w.Header().Get("Allow"))
	w = get(t, http.MethodGet, "/console")
	require.Equal(t, http.StatusMovedPermanently, w.Code)
	require.Equal(t, "/console/", w.Header().Get("Location"))
}

// Every module a script imports is there: a missing one would break the
// page in the browser only.
func TestEveryImportedModuleExists(t *testing.T) {
	t.Parallel()
	assets := os.DirFS("assets")
	imp := regexp.MustCompile(`(?m)^import .* from '([^']+)';$`)
	n := 0
	err := fs.WalkDir(assets, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		src, err := fs.ReadFile(assets, p)
		if err != nil {
			return err
		}
		for _, m := range imp.FindAllStringSubmatch(string(src), -1) {
			target := path.Join(path.Dir(p), m[1])
			w := get(t, http.MethodGet, "/console/assets/"+target)
			require.Equal(t, http.StatusOK, w.Code, "%s imports %s", p, m[1])
			n++
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, n, 10)
}
