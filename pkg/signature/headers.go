package signature

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

const (
	maxIDLen        = 256
	maxTimestampLen = 12
)

// oneValue returns the single value of the header name. An absent or empty
// header is ErrMissingHeader; several lines are dup (a sender sends each
// header once, so a second line is an attempt to confuse a parser).
func oneValue(h http.Header, name string, dup error) (string, error) {
	vs := h.Values(name)
	switch {
	case len(vs) == 0 || len(vs) == 1 && vs[0] == "":
		return "", fmt.Errorf("%w: %s", ErrMissingHeader, name)
	case len(vs) > 1:
		return "", fmt.Errorf("%w: %s sent %d times", dup, name, len(vs))
	}
	return vs[0], nil
}

// checkID accepts 1 to 256 bytes of printable ASCII without spaces and, when
// noDot is set, without '.' (the Standard Webhooks field separator).
func checkID(name, id string, noDot bool) error {
	if len(id) > maxIDLen {
		return fmt.Errorf("%w: %s is longer than %d bytes", ErrBadID, name, maxIDLen)
	}
	for i := range len(id) {
		c := id[i]
		if c <= ' ' || c >= 0x7f {
			return fmt.Errorf("%w: %s has a byte outside printable ASCII at %d", ErrBadID, name, i)
		}
		if noDot && c == '.' {
			return fmt.Errorf("%w: %s contains '.'", ErrBadID, name)
		}
	}
	return nil
}

// parseTimestamp accepts only the canonical decimal form of Unix seconds:
// 1 to 12 digits, no sign, no leading zero. The raw header is what gets
// signed, so raw and canonical must be the same string.
func parseTimestamp(name, s string) (time.Time, error) {
	bad := func(why string) (time.Time, error) {
		return time.Time{}, fmt.Errorf("%w: %s %s", ErrBadTimestamp, name, why)
	}
	if len(s) > maxTimestampLen {
		return bad("has more than 12 digits")
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return bad("is not a decimal number of seconds")
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return bad("has a leading zero")
	}
	n, err := strconv.ParseInt(s, 10, 64) // cannot fail after the checks
	if err != nil {
		return bad("is not a decimal number of seconds")
	}
	return time.Unix(n, 0), nil
}

// checkWindow accepts ts when it is at most tol away from now, either way.
func checkWindow(now, ts time.Time, tol time.Duration) error {
	// Two Subs rather than one negated: Sub saturates, and negating the
	// minimum Duration overflows.
	if age := now.Sub(ts); age > tol {
		return fmt.Errorf("%w: %v old, tolerance %v", ErrTooOld, age, tol)
	}
	if ahead := ts.Sub(now); ahead > tol {
		return fmt.Errorf("%w: %v ahead, tolerance %v", ErrTooNew, ahead, tol)
	}
	return nil
}
