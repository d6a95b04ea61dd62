package frontdoor

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// Tokens are the bearer tokens the front door accepts (Config.Tokens).
// Only their SHA-256 sums are kept, and a presented token is compared with
// every one of them in constant time, so neither a token's content nor its
// length nor which one matched shows in the response time.
type Tokens struct {
	sums [][sha256.Size]byte
}

// Token limits: long enough to be unguessable, short enough to bound the
// work a request can cause.
const (
	minTokenLen = 16
	maxTokenLen = 512
	maxTokens   = 1000
	// maxTokensFile bounds a tokens file, comments included.
	maxTokensFile = 1 << 20
)

// LoadTokens reads a tokens file: one token per line; blank lines and
// lines starting with # are skipped. Rotate a token by listing the old and
// the new one until every client uses the new one.
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("front door tokens: %w", err)
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, maxTokensFile+1))
	if err != nil {
		return nil, fmt.Errorf("front door tokens %s: %w", path, err)
	}
	if len(data) > maxTokensFile {
		return nil, fmt.Errorf("front door tokens %s: larger than %d bytes", path, maxTokensFile)
	}
	t, err := ParseTokens(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("front door tokens %s: %w", path, err)
	}
	return t, nil
}

// ParseTokens reads tokens as LoadTokens does. Its errors name the line,
// never the token.
func ParseTokens(r io.Reader) (*Tokens, error) {
	t := &Tokens{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := validToken(line); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if len(t.sums) == maxTokens {
			return nil, fmt.Errorf("line %d: more than %d tokens", n, maxTokens)
		}
		t.sums = append(t.sums, sha256.Sum256([]byte(line)))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	if len(t.sums) == 0 {
		return nil, errors.New("no tokens (a file without any would lock every client out)")
	}
	return t, nil
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
	return len(t.sums)
}

// allows reports whether an Authorization header carries one of the
// tokens; sent reports whether it carried a bearer token at all.
func (t *Tokens) allows(header string) (ok, sent bool) {
	scheme, tok, _ := strings.Cut(strings.TrimSpace(header), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return false, false
	}
	tok = strings.TrimSpace(tok)
	if tok == "" || len(tok) > maxTokenLen {
		return false, true
	}
	sum := sha256.Sum256([]byte(tok))
	match := 0
	for i := range t.sums {
		match |= subtle.ConstantTimeCompare(sum[:], t.sums[i][:])
	}
	return match == 1, true
}

// authenticated answers 401 to a request without one of the tokens, and
// passes the others to next. Without tokens every request passes.
func (s *Server) authenticated(next http.Handler) http.Handler {
	if s.cfg.Tokens == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, sent := s.cfg.Tokens.allows(r.Header.Get("Authorization"))
		if ok {
			next.ServeHTTP(w, r)
			return
		}
		challenge, msg := `Bearer realm="pollux"`, "send Authorization: Bearer <token>"
		if sent {
			challenge += `, error="invalid_token"`
			msg = "the bearer token is not one this front door accepts"
		}
		w.Header().Set("WWW-Authenticate", challenge)
		fail(http.StatusUnauthorized, CodeUnauthorized, "", msg).write(w)
	})
}
