package frontdoor

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/internal/edge/tenant"
	"github.com/pollux-dev/pollux/pkg/logkey"
)

// Which name it answers to comes first: without tokens (or with
// Config.AllowedHosts) a request whose Host is not localhost, a loopback
// address or an allowed name is answered 421 host_not_allowed, whatever
// its path — the console's pages and session included (see listen.go).
//
// Who may do what: every request but the console's own pages and its
// login is made by a principal — the bearer token it carries, the browser
// session its cookie holds, or, without a tokens file, anyone.
//
// State-changing requests (every method but GET, HEAD and OPTIONS) pass
// three more checks, whatever the tokens file says:
//
//   - an Origin header, when present, must be the request's own host: a
//     page of another site cannot make a browser act on Pollux, not even
//     on a loopback Pollux without tokens;
//   - a request authenticated by the session cookie, or a cookie-less
//     browser request (it has an Origin) to a front door without tokens,
//     must carry the CSRF token of GET /console/session in X-CSRF-Token; a
//     bearer token needs none, a browser never sends one by itself;
//   - a read-only principal is refused.
//
// All three answer 403 forbidden.

// SessionCookie is the name of the console's session cookie.
const SessionCookie = "pollux_session"

// CSRFHeader is the header a cookie-authenticated state-changing request
// carries the CSRF token in.
const CSRFHeader = "X-CSRF-Token"

// SessionLifetime is how long a console login lasts.
const SessionLifetime = 12 * time.Hour

// principal is who makes a request.
type principal struct {
	role Role
	name string
	// app is the app the token belongs to (token.app), and allApps
	// whether it sees every app's jobs (token.allApps).
	app     string
	allApps bool
	// via is how it was recognised: viaToken, viaSession or viaOpen.
	via string
	// csrf is the CSRF token a browser must send (sessions and open doors).
	csrf string
	// expires is when a session ends.
	expires time.Time
	// token is the token it was recognised by (a bearer's, a session's),
	// whose rate= is its quota.
	token token
}

const (
	viaToken   = "token"
	viaSession = "session"
	viaOpen    = "open"
)

type principalKey struct{}

// who returns the request's principal (set by access).
func who(r *http.Request) principal {
	p, _ := r.Context().Value(principalKey{}).(principal)
	return p
}

// by is who acts, as route pauses and logs record it: the token's name,
// else "console" for a browser, else "api".
func (p principal) by(r *http.Request) string {
	switch {
	case p.name != "":
		return p.name
	case p.via == viaSession || r.Header.Get("Origin") != "":
		return "console"
	default:
		return "api"
	}
}

// filesOwner is whose input files p uploads and names: its app's, so
// that an app's tokens (a rotation) share them and another app's never
// see them; a token of no app, its own (by).
func (p principal) filesOwner(r *http.Request) string {
	if p.app != "" {
		return "app:" + p.app
	}
	return p.by(r)
}

// viewer is what p may see: an admin's token, one of app=*, or anyone at
// a front door without tokens, every app's jobs; any other token its
// app's.
func (p principal) viewer() tenant.Viewer {
	if p.via == viaOpen || p.role == RoleAdmin || p.allApps {
		return tenant.Operator
	}
	return tenant.Of(p.app)
}

// operator reports whether p may act on what every app shares (pause and
// resume a route): an admin, or anyone at a front door without tokens.
func (p principal) operator() bool { return p.via == viaOpen || p.role == RoleAdmin }

// changes reports whether a method changes state.
func changes(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// public reports whether a path is served to anyone: the console's pages
// (its data comes from the API) and its session endpoints, which check
// what they need themselves; and the signed input paths, whose signature
// is what they check (inputs.go); and the fal webhooks' JWKS, public key
// material (faljwks.go).
func public(path string) bool {
	return path == "/" || path == "/console" || strings.HasPrefix(path, "/console/") || inputPath(path) || path == FalJWKSPath
}

// access wraps the front door's handler with the checks above.
func (s *Server) access(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e := s.checkHost(r); e != nil {
			s.log.Debug().Str(logkey.Host, r.Host).Str(logkey.Remote, r.RemoteAddr).Str(logkey.Method, r.Method).Str(logkey.Path, r.URL.Path).Msg("request for a host this front door does not answer")
			s.writeError(w, r, e)
			return
		}
		if changes(r.Method) {
			if e := sameOrigin(r); e != nil {
				s.writeError(w, r, e)
				return
			}
		}
		if public(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		p, e := s.principal(r)
		if e != nil {
			s.writeError(w, r, e)
			return
		}
		if e := s.overQuota(r.Context(), p); e != nil {
			s.log.Debug().Str(logkey.By, p.by(r)).Str(logkey.App, p.app).Str(logkey.Path, r.URL.Path).Msg("request over its quota")
			s.writeError(w, r, e)
			return
		}
		if changes(r.Method) {
			if e := s.mayChange(r, p); e != nil {
				s.log.Info().Str(logkey.By, p.by(r)).Str(logkey.Method, r.Method).Str(logkey.Path, r.URL.Path).Str(logkey.Why, e.detail.Message).Msg("request refused")
				s.writeError(w, r, e)
				return
			}
		}
		ctx := tenant.With(context.WithValue(r.Context(), principalKey{}, p), p.viewer())
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// checkHost refuses a request whose Host this front door does not answer:
// without tokens (or with an allow list), one that is neither localhost,
// a loopback address nor an allowed name.
func (s *Server) checkHost(r *http.Request) *apiError {
	if s.cfg.Tokens != nil && len(s.allowed) == 0 {
		return nil
	}
	if loopback(r.Host) || s.allowed[strings.TrimSuffix(hostname(r.Host), ".")] {
		return nil
	}
	at := "http://127.0.0.1"
	if _, port, err := net.SplitHostPort(r.Host); err == nil {
		at += ":" + port
	}
	how := "allow the name with " + flagAllowedHosts
	if s.cfg.Tokens == nil {
		how += ", or give the front door tokens with " + flagTokens
	}
	return fail(http.StatusMisdirectedRequest, CodeHostNotAllowed, "Host", fmt.Sprintf(
		"this front door answers only requests for localhost, a loopback address or an allowed name, not Host %q "+
			"(so that a page on a foreign name that resolves here cannot use it): open it at %s, or %s",
		r.Host, at, how))
}

// sameOrigin refuses a request whose Origin is present and not the
// request's own host.
func sameOrigin(r *http.Request) *apiError {
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	u, err := url.Parse(o)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && sameHost(u.Scheme, u.Host, r.Host) {
		return nil
	}
	return fail(http.StatusForbidden, CodeForbidden, "Origin",
		fmt.Sprintf("a request from another site (Origin %q, this host %q) may not change anything", o, r.Host))
}

// sameHost compares an origin's host with a Host header, default ports
// made explicit.
func sameHost(scheme, origin, host string) bool {
	port := map[string]string{"http": "80", "https": "443"}[scheme]
	norm := func(h string) string {
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), port)
		}
		return strings.ToLower(h)
	}
	return norm(origin) == norm(host)
}

// principal recognises who makes r: the bearer token (or, below a face
// whose SDK sends its key in a header of its own, that header:
// face.KeyHeader), else the session
// cookie, else (without tokens) anyone.
func (s *Server) principal(r *http.Request) (principal, *apiError) {
	if s.cfg.Tokens == nil {
		return principal{role: RoleAct, via: viaOpen, csrf: s.openCSRF}, nil
	}
	entries := s.cfg.Tokens.current()
	tok, sent := bearer(r.Header.Get("Authorization"))
	if !sent {
		tok, sent = s.faceKey(r)
	}
	if sent {
		t, ok := lookup(entries, tok)
		if !ok {
			return principal{}, unauthorized(true)
		}
		return principal{role: t.role, name: t.name, app: t.app, allApps: t.allApps, via: viaToken, token: t}, nil
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		if p, ok := verifySession(entries, c.Value, s.cfg.Now()); ok {
			return p, nil
		}
	}
	return principal{}, unauthorized(false)
}

// unauthorized is the 401 of a request without a token the front door
// accepts; sent says whether it carried one.
func unauthorized(sent bool) *apiError {
	e := fail(http.StatusUnauthorized, CodeUnauthorized, "", "send Authorization: Bearer <token>, or log in to the console")
	e.header = http.Header{}
	e.header.Set("WWW-Authenticate", `Bearer realm="pollux"`)
	if sent {
		e.header.Set("WWW-Authenticate", `Bearer realm="pollux", error="invalid_token"`)
		e.detail.Message = "the bearer token is not one this front door accepts"
	}
	return e
}

// mayChange checks a state-changing request of p: its CSRF token when a
// browser makes it, and p's role.
func (s *Server) mayChange(r *http.Request, p principal) *apiError {
	browser := p.via == viaSession || (p.via == viaOpen && r.Header.Get("Origin") != "")
	if browser && !equal(r.Header.Get(CSRFHeader), p.csrf) {
		return fail(http.StatusForbidden, CodeForbidden, CSRFHeader,
			"a browser's request must carry the csrf of GET /console/session in "+CSRFHeader)
	}
	if !p.role.Acts() {
		return fail(http.StatusForbidden, CodeForbidden, "", "a read-only token may not change anything")
	}
	return nil
}

func equal(a, b string) bool {
	return b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// A session cookie is "v1.<token id>.<role>.<name>.<expiry>.<mac>", the
// name base64url-encoded, the expiry in Unix seconds, the MAC an
// HMAC-SHA256 of the rest under a key derived from the token's sum — so
// every front door with the same tokens file accepts it, and none does
// once the token has left the file. The role and name it carries are the
// token's at login; the file's current ones are what count.

var b64 = base64.RawURLEncoding

// keys derives a token's session key and its public id.
func (t token) keys() (key []byte, id string) {
	m := hmac.New(sha256.New, t.sum[:])
	m.Write([]byte("pollux session key v1"))
	key = m.Sum(nil)
	m = hmac.New(sha256.New, t.sum[:])
	m.Write([]byte("pollux token id v1"))
	return key, b64.EncodeToString(m.Sum(nil)[:12])
}

func mac(key []byte, parts ...string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return b64.EncodeToString(m.Sum(nil))
}

// newSession returns the cookie value of a session of t until expires.
func newSession(t token, expires time.Time) string {
	key, id := t.keys()
	payload := strings.Join([]string{"v1", id, string(t.role), b64.EncodeToString([]byte(t.name)), strconv.FormatInt(expires.Unix(), 10)}, ".")
	return payload + "." + mac(key, payload)
}

// verifySession returns the principal of a session cookie's value, if it
// is valid at now and its token is in entries.
func verifySession(entries []token, value string, now time.Time) (principal, bool) {
	parts := strings.Split(value, ".")
	if len(parts) != 6 || parts[0] != "v1" {
		return principal{}, false
	}
	exp, err := strconv.ParseInt(parts[4], 10, 64)
	if err != nil || !now.Before(time.Unix(exp, 0)) {
		return principal{}, false
	}
	payload := strings.Join(parts[:5], ".")
	for _, t := range entries {
		key, id := t.keys()
		if id != parts[1] {
			continue
		}
		if !hmac.Equal([]byte(mac(key, payload)), []byte(parts[5])) {
			return principal{}, false
		}
		return principal{role: t.role, name: t.name, app: t.app, allApps: t.allApps, via: viaSession, csrf: mac(key, "csrf", payload), expires: time.Unix(exp, 0).UTC(), token: t}, true
	}
	return principal{}, false
}

// openCSRF is the CSRF token of a front door without tokens: the same in
// every process, as any would do — what stops another site is that a
// browser sends no such header across sites without a CORS preflight,
// which the front door never grants.
func openCSRF() string { return mac([]byte("pollux open front door"), "csrf") }

// Session is what GET /console/session answers: who the browser is and
// the CSRF token its state-changing requests carry in X-CSRF-Token.
type Session struct {
	// Role is act, read or admin.
	Role Role `json:"role"`
	// Name is the token's name ("" when it has none).
	Name string `json:"name"`
	// App is the app whose jobs the browser sees ("" for an admin, or a
	// token of no app); All is true when it sees every app's.
	App string `json:"app,omitempty"`
	All bool   `json:"all_apps"`
	// CSRF goes into the X-CSRF-Token header of every state-changing
	// request ("" for a bearer token, which needs none).
	CSRF string `json:"csrf"`
	// Auth is true when the front door takes tokens (and so logins).
	Auth bool `json:"auth"`
	// ExpiresAt is when a session ends (absent otherwise).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

func (p principal) session(auth bool) Session {
	s := Session{Role: p.role, Name: p.name, CSRF: p.csrf, Auth: auth, App: p.app, All: !p.viewer().Scoped}
	if !p.expires.IsZero() {
		s.ExpiresAt = &p.expires
	}
	return s
}

// session handles GET /console/session: 401 without a valid session or
// token (the console shows its login), else the Session.
func (s *Server) session(w http.ResponseWriter, r *http.Request) *apiError {
	p, e := s.principal(r)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, p.session(s.cfg.Tokens != nil))
	return nil
}

// maxLoginBody bounds a login form.
const maxLoginBody = 4 << 10

// login handles POST /console/login: the form field token, one of the
// tokens file's, starts a session. A browser's form post is redirected to
// the console (with ?login=failed when refused); a script gets the
// Session, or 401.
func (s *Server) login(w http.ResponseWriter, r *http.Request) *apiError {
	html := strings.Contains(r.Header.Get("Accept"), "text/html")
	if s.cfg.Tokens == nil {
		return fail(http.StatusNotFound, CodeNotFound, "", "this front door has no tokens file: no login is needed")
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" && mt != "multipart/form-data" {
		return fail(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "Content-Type", "log in with a form: application/x-www-form-urlencoded with the field token")
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		return fail(http.StatusBadRequest, CodeInvalidBody, "", "the login form does not parse")
	}
	t, ok := lookup(s.cfg.Tokens.current(), strings.TrimSpace(r.PostForm.Get("token")))
	if !ok {
		s.log.Info().Str(logkey.Remote, r.RemoteAddr).Msg("console login refused")
		if html {
			http.Redirect(w, r, "/console/?login=failed", http.StatusSeeOther)
			return nil
		}
		e := unauthorized(true)
		e.detail.Field, e.detail.Message = "token", "not a token this front door accepts"
		return e
	}
	expires := s.cfg.Now().Add(SessionLifetime)
	value := newSession(t, expires)
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: value, Path: "/", Expires: expires, MaxAge: int(SessionLifetime.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r),
	})
	p, _ := verifySession([]token{t}, value, s.cfg.Now())
	s.log.Info().Str(logkey.By, p.by(r)).Str(logkey.Role, string(t.role)).Msg("console login")
	if html {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
		return nil
	}
	writeJSON(w, http.StatusOK, p.session(true))
	return nil
}

// logout handles POST /console/logout: the cookie is cleared. (The
// session's value stays valid until it expires or its token leaves the
// file; the browser no longer has it.)
func (s *Server) logout(w http.ResponseWriter, r *http.Request) *apiError {
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r)})
	if strings.Contains(r.Header.Get("Accept"), "text/html") {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
		return nil
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// secure reports whether the session cookie needs the Secure attribute:
// always, but for plain http to a loopback host, where a browser would
// not send it back otherwise (and nothing travels beyond the machine).
func secure(r *http.Request) bool {
	return r.TLS != nil || !loopback(r.Host)
}
