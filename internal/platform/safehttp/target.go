package safehttp

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// MaxURLLen is the longest webhook URL CheckURL accepts.
const MaxURLLen = 2048

// CheckURL checks, before anything is called, a URL an application asks
// Pollux to call: absolute https (http only to a loopback host), a host
// and no credentials; and, unless allowPrivate, no host that is an
// address Blocked names (or localhost). A name is checked again on the
// address it resolves to when called (Client). The error says what is
// wrong, without the URL.
func CheckURL(raw string, allowPrivate bool) error {
	if len(raw) > MaxURLLen {
		return fmt.Errorf("%d bytes, longer than %d", len(raw), MaxURLLen)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("scheme %q: want https", u.Scheme)
	case u.Hostname() == "":
		return errors.New("no host")
	case u.User != nil:
		return errors.New("credentials in the URL are not accepted")
	}
	host := strings.ToLower(u.Hostname())
	loopback := host == "localhost" || strings.HasSuffix(host, ".localhost")
	why := ""
	if ip, err := netip.ParseAddr(host); err == nil {
		loopback = ip.Unmap().IsLoopback()
		why = Blocked(ip)
	} else if loopback {
		why = "a loopback address"
	}
	if u.Scheme == "http" && !loopback {
		return errors.New("scheme http: want https (http only to a loopback host)")
	}
	if why != "" && !allowPrivate {
		return fmt.Errorf("host %s is %s, which this Pollux does not call (allow_private is off)", host, why)
	}
	return nil
}
