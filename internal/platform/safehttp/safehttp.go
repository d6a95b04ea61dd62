// Package safehttp is the HTTP client Pollux calls URLs it did not choose
// with — applications' webhook endpoints (package notify), providers'
// output URLs (package custody) — so that such a URL cannot make Pollux
// reach into its own machine or network (SSRF).
package safehttp

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// RefusedError is a call Pollux would not make: its address is one such a
// call must not reach (loopback, private, link-local, ...) unless private
// addresses are allowed.
type RefusedError struct{ Addr, Why string }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refused to call %s: %s (allow_private is off)", e.Addr, e.Why)
}

// Blocked says why a call must not reach ip, "" when it may: the
// addresses of the machine and its networks.
func Blocked(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsPrivate():
		return "a private address"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "a link-local address"
	case ip.IsUnspecified():
		return "an unspecified address"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "a multicast address"
	case cgnat.Contains(ip), thisNet.Contains(ip):
		return "a shared or reserved address"
	}
	return ""
}

var (
	cgnat   = netip.MustParsePrefix("100.64.0.0/10")
	thisNet = netip.MustParsePrefix("0.0.0.0/8")
)

// Client is an HTTP client for such calls: no proxy from the environment
// (it would reach what the check below refuses), no redirects (a 3xx is
// an answer, not a new target), a timeout per call (the whole call, its
// body read included), and, unless allowPrivate, a dialer that refuses
// the addresses Blocked names — checked on the address actually dialed,
// so a name that resolves to one (or rebinds to one) is refused too.
func Client(timeout time.Duration, allowPrivate bool) *http.Client {
	d := &net.Dialer{Timeout: min(timeout, 10*time.Second)}
	if !allowPrivate {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return &RefusedError{Addr: address, Why: "not an IP address"}
			}
			if why := Blocked(ap.Addr()); why != "" {
				return &RefusedError{Addr: address, Why: why}
			}
			return nil
		}
	}
	t := &http.Transport{
		DialContext:           d.DialContext,
		TLSHandshakeTimeout:   min(timeout, 10*time.Second),
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
	}
	return &http.Client{Transport: t, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// TrimURLError drops the method and URL net/http puts before a call's
// error: the URL may carry a token in its query.
func TrimURLError(err error) string {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner.Error()
		}
	}
	return err.Error()
}
