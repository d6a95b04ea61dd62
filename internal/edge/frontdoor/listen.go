package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Where a front door may listen, and which Host it answers — the one rule
// every binary that serves it follows (cmd/ingest, pollux serve, pollux
// dev):
//
//   - Without tokens anyone who reaches it may act, so it listens on
//     loopback only (CheckExposure), unless the operator says a gateway in
//     front authenticates (insecure).
//   - Without tokens it answers only a request whose Host is localhost, a
//     loopback address or one of Config.AllowedHosts (hostAllowed): a page
//     on a foreign name that resolves to 127.0.0.1 (DNS rebinding) is the
//     same origin as the front door to the browser, so neither the Origin
//     check nor the CSRF token stops it — its Host does. With tokens the
//     attacker's page has no token, and the session cookie is scoped to the
//     host name the console logged in at, so rebinding cannot carry it:
//     any Host is answered, unless AllowedHosts is set, which is then
//     enforced too.

// The flags every binary that serves the front door names in its errors.
const (
	flagAddr         = "--http-addr"
	flagTokens       = "--http-tokens-file (POLLUX_HTTP_TOKENS_FILE)"
	flagInsecure     = "--http-insecure (POLLUX_HTTP_INSECURE)"
	flagAllowedHosts = "--http-allowed-hosts (POLLUX_HTTP_ALLOWED_HOSTS)"
)

// CheckExposure refuses an address beyond loopback for a front door
// without tokens, unless insecure: anyone reaching it could submit, cancel
// and pause. A host name counts as loopback when every address it resolves
// to is one; an empty host (every interface) never does.
func CheckExposure(addr string, tokens, insecure bool) error {
	local, err := OnLoopback(addr)
	if err != nil {
		return fmt.Errorf("%s %w", flagAddr, err)
	}
	if tokens || insecure || local {
		return nil
	}
	return errors.New(flagAddr + " " + addr + " listens beyond loopback and the front door has no tokens: " +
		"give it " + flagTokens + ", listen on 127.0.0.1, " +
		"or set " + flagInsecure + " if a gateway in front authenticates")
}

// OnLoopback reports whether a listen address accepts connections from
// this machine only (the rule CheckExposure applies): for listeners other
// than the front door that have no authentication of their own, such as
// pollux serve's embedded NATS server.
func OnLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("%q: %w", addr, err)
	}
	return loopbackHost(host), nil
}

// Listen checks addr with CheckExposure and listens on it.
func Listen(addr string, tokens, insecure bool) (net.Listener, error) {
	if err := CheckExposure(addr, tokens, insecure); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("front door listener: %w", err)
	}
	return ln, nil
}

// BaseURL is the URL a client on this machine reaches a listener at: its
// own address, but for a listener on every interface, which is no address
// to connect to, 127.0.0.1 (0.0.0.0) or localhost ([::], which may or may
// not take IPv4 too) — a Host a front door without tokens answers.
func BaseURL(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	switch {
	case !ok:
		return "http://" + addr.String()
	case tcp.IP.To4() != nil && tcp.IP.IsUnspecified():
		return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp.Port))
	case tcp.IP == nil || tcp.IP.IsUnspecified():
		return "http://" + net.JoinHostPort("localhost", strconv.Itoa(tcp.Port))
	}
	return "http://" + tcp.String()
}

// loopbackHost reports whether a listening host names this machine only.
func loopbackHost(host string) bool {
	if host == "" {
		return false // every interface
	}
	if loopback(host) {
		return true
	}
	if net.ParseIP(host) != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return false
		}
	}
	return true
}

// listensOnLoopback reports whether addr accepts connections from this
// host only.
func listensOnLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// loopback reports whether a host (or host:port) names this machine only:
// localhost or a loopback address.
func loopback(host string) bool {
	host = hostname(host)
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// hostname is a Host header's (or an address's) host: its port and an
// IPv6 literal's brackets dropped, lower-cased.
func hostname(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.ToLower(strings.Trim(host, "[]"))
}

// CheckAllowedHosts checks hosts as New checks Config.AllowedHosts, for a
// command to refuse them before anything starts.
func CheckAllowedHosts(hosts []string) error {
	_, err := allowedHosts(hosts)
	return err
}

// allowedHosts validates and normalises Config.AllowedHosts: host names or
// addresses, without a port or a scheme.
func allowedHosts(hosts []string) (map[string]bool, error) {
	set := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		name := strings.ToLower(strings.Trim(h, "[]"))
		if name == "" || len(name) > 253 || net.ParseIP(name) == nil && !validHostname(name) {
			return nil, fmt.Errorf("frontdoor: AllowedHosts: %q is not a host name or an IP address (give names without a scheme or a port)", h)
		}
		set[strings.TrimSuffix(name, ".")] = true
	}
	return set, nil
}

// validHostname reports whether name is a DNS name: labels of letters,
// digits and hyphens (underscores too, as some internal names have).
func validHostname(name string) bool {
	for label := range strings.SplitSeq(strings.TrimSuffix(name, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
