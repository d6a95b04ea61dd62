package frontdoor

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
)

// Role is what a token may do.
type Role string

// The roles of a tokens file's lines.
const (
	// RoleAct may do everything: read, submit, track, cancel, pause and
	// resume routes. A line without a role is RoleAct.
	RoleAct Role = "act"
	// RoleRead may only read: every state-changing request is answered
	// 403 forbidden.
	RoleRead Role = "read"
	// RoleAdmin is an operator's: it acts as RoleAct does, sees every
	// app's jobs, and alone pauses and resumes routes, which every app
	// shares.
	RoleAdmin Role = "admin"
)

// AllApps is the app= of a token that sees every app's jobs.
const AllApps = "*"

// roles are the roles a tokens file's line may name.
var roles = []Role{RoleAct, RoleRead, RoleAdmin}

// Acts reports whether a role may change state.
func (r Role) Acts() bool { return r == RoleAct || r == RoleAdmin }

// Tokens are the bearer tokens the front door accepts (Config.Tokens),
// each with its role and an optional name. Only their SHA-256 sums are
// kept, and a presented token is compared with every one of them in
// constant time, so neither a token's content nor its length nor which one
// matched shows in the response time. Tokens loaded from a file follow it:
// a request after the file changed sees the new contents (a file that no
// longer parses is logged and the last good contents stay in force).
type Tokens struct {
	path string
	log  zerolog.Logger

	// apps are the apps a token may name (Config.Apps; none: any).
	apps []string

	mu      sync.RWMutex
	entries []token
	stamp   fileStamp
	failed  string // the reload error last logged
}

// token is one line of a tokens file.
type token struct {
	sum  [sha256.Size]byte
	role Role
	name string
	// app is the application the token belongs to (app=, default its
	// name; "" for a token with neither): it creates the app's jobs and
	// sees only those, but for an admin.
	app string
	// allApps is set by app=*: the token sees every app's jobs (an
	// operator's dashboard), as an admin's does.
	allApps bool
	// rate is the token's quota in requests a second (0: none).
	rate float64
}

// fileStamp tells whether a file changed since it was read.
type fileStamp struct {
	mod  time.Time
	size int64
}

// Token limits: long enough to be unguessable, short enough to bound the
// work a request can cause.
const (
	minTokenLen = 16
	maxTokenLen = 512
	maxTokens   = 1000
	// maxTokensFile bounds a tokens file, comments included.
	maxTokensFile = 1 << 20
	// MaxTokenName bounds a token's name: it is shown as who paused a
	// route.
	MaxTokenName = 64
	// maxTokenRate bounds a token's quota (rate=).
	maxTokenRate = 1_000_000
)

// LoadTokens reads a tokens file: one token a line, optionally followed by
// its role (act, the default, read, or admin: an operator, who sees every
// app and pauses routes), a name (name=alice) that appears
// as who acted in route pauses and logs — never the token itself — the
// app it belongs to (app=studio, default its name: it sees only the
// app's jobs, and the jobs it creates are the app's; app=* sees every
// app's, as an operator's dashboard does), and a
// quota (rate=50: requests a second across the fleet, a second's worth
// at once, beyond which a request is answered 429 with Retry-After;
// default none).
// Blank lines and lines starting with # are skipped. Rotate a token by
// listing the old and the new one until every client uses the new one;
// the front door rereads the file when it changes, so removing a line
// takes effect at the next request, sessions made with it included.
func LoadTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	entries, stamp, err := readTokens(path)
	if err != nil {
		return nil, err
	}
	t.entries, t.stamp = entries, stamp
	return t, nil
}

// readTokens reads and parses a tokens file.
func readTokens(path string) ([]token, fileStamp, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("front door tokens: %w", err)
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("front door tokens: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTokensFile+1))
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("front door tokens %s: %w", path, err)
	}
	if len(data) > maxTokensFile {
		return nil, fileStamp{}, fmt.Errorf("front door tokens %s: larger than %d bytes", path, maxTokensFile)
	}
	entries, err := parseTokens(bytes.NewReader(data))
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("front door tokens %s: %w", path, err)
	}
	return entries, fileStamp{mod: st.ModTime(), size: st.Size()}, nil
}

// ParseTokens reads tokens as LoadTokens does, once. Its errors name the
// line, never the token.
func ParseTokens(r io.Reader) (*Tokens, error) {
	entries, err := parseTokens(r)
	if err != nil {
		return nil, err
	}
	return &Tokens{entries: entries}, nil
}

func parseTokens(r io.Reader) ([]token, error) {
	var out []token
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if err := validToken(fields[0]); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		tok := token{sum: sha256.Sum256([]byte(fields[0])), role: RoleAct}
		roleSeen := false
		for i, f := range fields[1:] {
			rateText, isRate := strings.CutPrefix(f, "rate=")
			app, isApp := strings.CutPrefix(f, "app=")
			switch name, isName := strings.CutPrefix(f, "name="); {
			case isApp && app == AllApps && tok.app == "" && !tok.allApps:
				tok.allApps = true
			case isApp:
				if tok.app != "" || tok.allApps || !events.ValidApp(app) {
					return nil, fmt.Errorf("line %d: app= is given once, 1 to %d characters of [A-Za-z0-9_-]", n, events.MaxAppLen)
				}
				tok.app = app
			case isRate:
				r, err := strconv.ParseFloat(rateText, 64)
				if tok.rate != 0 || err != nil || !(r > 0 && r <= maxTokenRate) {
					return nil, fmt.Errorf("line %d: rate= is given once, a number of requests a second above 0 and at most %d", n, maxTokenRate)
				}
				tok.rate = r
			case isName:
				if tok.name != "" {
					return nil, fmt.Errorf("line %d: name= given twice", n)
				}
				if name == "" || len(name) > MaxTokenName || !utf8.ValidString(name) {
					return nil, fmt.Errorf("line %d: a name is 1 to %d bytes of UTF-8", n, MaxTokenName)
				}
				tok.name = name
			case slices.Contains(roles, Role(f)) && !roleSeen:
				tok.role, roleSeen = Role(f), true
			default:
				return nil, fmt.Errorf("line %d: word %d after the token is neither a role (act, read or admin, once), name=<who>, app=<app> nor rate=<requests a second>", n, i+1)
			}
		}
		if tok.role == RoleAdmin && (tok.app != "" || tok.allApps) {
			return nil, fmt.Errorf("line %d: an admin sees every app: app= is an app's token's", n)
		}
		if tok.app == "" && tok.name != "" && !tok.allApps && tok.role != RoleAdmin {
			if !events.ValidApp(tok.name) {
				return nil, fmt.Errorf("line %d: the token's app is its name, and %q is not an app's name (1 to %d characters of [A-Za-z0-9_-]): give app=", n, tok.name, events.MaxAppLen)
			}
			tok.app = tok.name
		}
		if len(out) == maxTokens {
			return nil, fmt.Errorf("line %d: more than %d tokens", n, maxTokens)
		}
		out = append(out, tok)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	if len(out) == 0 {
		return nil, errors.New("no tokens (a file without any would lock every client out)")
	}
	return out, nil
}

// knownApps checks that every token's app is one of apps (none: any).
func knownApps(entries []token, apps []string) error {
	if len(apps) == 0 {
		return nil
	}
	for i, t := range entries {
		if t.app != "" && !slices.Contains(apps, t.app) {
			return fmt.Errorf("token %d: app %q is not one of the configured apps (apps: %v)", i+1, t.app, apps)
		}
		if t.app == "" && t.role != RoleAdmin && !t.allApps {
			return fmt.Errorf("token %d: with apps configured, a token that is not an admin's names its app (app= or name=)", i+1)
		}
	}
	return nil
}

// validToken checks a token against RFC 6750's token68 characters and the
// length limits.
func validToken(tok string) error {
	if len(tok) < minTokenLen || len(tok) > maxTokenLen {
		return fmt.Errorf("a token must have %d to %d characters, this one has %d", minTokenLen, maxTokenLen, len(tok))
	}
	body := strings.TrimRight(tok, "=")
	if body == "" {
		return errors.New("a token cannot be only '='")
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return fmt.Errorf("character %d is not allowed in a bearer token (letters, digits, -._~+/ and trailing =)", i+1)
		}
	}
	return nil
}

// Len is the number of tokens (0 for nil: no authentication).
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.entries)
}

// current returns the tokens in force, rereading the file first if it
// changed.
func (t *Tokens) current() []token {
	if t.path != "" {
		t.refresh()
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.entries
}

// refresh rereads the file when its size or modification time changed.
func (t *Tokens) refresh() {
	st, err := os.Stat(t.path)
	t.mu.RLock()
	same := err == nil && st.ModTime().Equal(t.stamp.mod) && st.Size() == t.stamp.size
	t.mu.RUnlock()
	if same {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	entries, stamp, err := readTokens(t.path)
	if err == nil {
		err = knownApps(entries, t.apps)
	}
	if err != nil {
		if st != nil {
			t.stamp = fileStamp{mod: st.ModTime(), size: st.Size()}
		}
		// Log once per version of the file (or per error while it is
		// missing), not once per request.
		if err.Error() != t.failed {
			t.failed = err.Error()
			t.log.Error().Err(err).Msg("the tokens file changed and does not load; the tokens read before stay in force")
		}
		return
	}
	t.entries, t.stamp, t.failed = entries, stamp, ""
	t.log.Info().Int(logkey.Tokens, len(entries)).Msg("tokens file reloaded")
}

// lookup returns the token tok is, comparing with every one in constant
// time.
func lookup(entries []token, tok string) (token, bool) {
	if tok == "" || len(tok) > maxTokenLen {
		return token{}, false
	}
	sum := sha256.Sum256([]byte(tok))
	found := -1
	for i := range entries {
		eq := subtle.ConstantTimeCompare(sum[:], entries[i].sum[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return token{}, false
	}
	return entries[found], true
}

// bearer returns the token of an Authorization header; sent reports
// whether it named the Bearer scheme at all.
func bearer(header string) (tok string, sent bool) {
	scheme, tok, _ := strings.Cut(strings.TrimSpace(header), " ")
	// Bearer is the front door's; Token (Replicate's SDK) and Key (fal's)
	// are how the provider SDKs a face serves send the same token.
	if !strings.EqualFold(scheme, "Bearer") && !strings.EqualFold(scheme, "Token") && !strings.EqualFold(scheme, "Key") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}
