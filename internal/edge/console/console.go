package console

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// Prefix is the path the console is served under.
const Prefix = "/console/"

//go:embed assets
var assets embed.FS

// csp allows the page nothing but its own origin: no inline script, no
// inline style sheet, no frames, and fetches only to the front door.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// Handler serves the console's assets at /console/...: the page itself
// at /console/ and its scripts and styles under /console/assets/. It
// answers GET and HEAD only, and 404 to any other path, so that the front
// door can mount it at /console/ beside its own /console/session.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has assets/
	}
	files := http.FileServerFS(sub)
	index, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		panic(err) // as above
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		name := "index.html"
		if r.URL.Path != Prefix {
			rest, ok := strings.CutPrefix(path.Clean(r.URL.Path), Prefix)
			if !ok || rest != name && !strings.HasPrefix(rest, "assets/") {
				http.NotFound(w, r)
				return
			}
			name = rest
		}
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		// Revalidate every time: the assets change with the binary, and a
		// stale module next to a fresh one breaks the page.
		h.Set("Cache-Control", "no-cache")
		if name == "index.html" {
			h.Set("Content-Type", "text/html; charset=utf-8")
			http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(index))
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + strings.TrimPrefix(name, "assets/")
		files.ServeHTTP(w, r2)
	})
}
