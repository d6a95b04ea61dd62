package notify

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/platform/safehttp"
	"github.com/pollux-dev/pollux/pkg/signature"
)

// endpoint is one destination of deliveries, ready to call.
type endpoint struct {
	name     string
	url      string // "" for submissions' own (each delivery carries its URL)
	secrets  [][]byte
	falKey   ed25519.PrivateKey // the fal face's webhooks' key (signature.DeriveFalKey of the first secret)
	terminal bool               // its end only
	timeout  time.Duration
	workers  int
	horizon  time.Duration
	client   *http.Client
	circuits circuits
}

// Defaults of an endpoint's settings.
const (
	DefaultTimeout = 10 * time.Second
	DefaultWorkers = 8
	DefaultHorizon = 24 * time.Hour
)

func newEndpoint(name string, c config.Endpoint) (*endpoint, error) {
	raw, err := c.Secrets()
	if err != nil {
		return nil, err
	}
	e := &endpoint{name: name, url: c.URL, terminal: c.Events == config.NotifyTerminal,
		timeout: c.Timeout, workers: c.Workers, horizon: c.Horizon}
	if e.timeout <= 0 {
		e.timeout = DefaultTimeout
	}
	if e.workers <= 0 {
		e.workers = DefaultWorkers
	}
	if e.horizon <= 0 {
		e.horizon = DefaultHorizon
	}
	for i, s := range raw {
		b, err := signature.ParseSecret(s)
		if err != nil {
			return nil, fmt.Errorf("secrets_env[%d] (%s): %w", i, c.SecretsEnv[i], err)
		}
		e.secrets = append(e.secrets, b)
	}
	if len(e.secrets) > 0 {
		e.falKey = signature.DeriveFalKey(e.secrets[0])
	}
	e.client = safeClient(e.timeout, c.AllowPrivate)
	e.circuits.m = map[string]*circuit{}
	e.circuits.after, e.circuits.cooldown = DefaultCircuitFailures, DefaultCircuitCooldown
	return e, nil
}

// RefusedError is a call Pollux would not make: its address is one a
// delivery must not reach (loopback, private, link-local, ...) unless the
// endpoint allows private addresses.
type RefusedError = safehttp.RefusedError

// safeClient is the HTTP client of deliveries (safehttp.Client).
var safeClient = safehttp.Client

// answer is what one call got.
type answer struct {
	status     int           // 0: no answer
	retryAfter time.Duration // the endpoint's Retry-After, if any
	err        error         // no answer: why
}

// ok reports a 2xx.
func (a answer) ok() bool { return a.status >= 200 && a.status < 300 }

// summary says the answer in a few words, for the delivery state.
func (a answer) summary() string {
	if a.err != nil {
		return a.err.Error()
	}
	return "HTTP " + strconv.Itoa(a.status)
}

// maxResponse is how much of an answer's body is read (and dropped).
const maxResponse = 64 << 10

// signer sets the headers that sign a delivery of body at now.
type signer func(h http.Header, now time.Time, body []byte)

// standardSigner signs with every one of secrets as Standard Webhooks
// does: the webhook-id (id), webhook-timestamp and webhook-signature
// headers.
func standardSigner(id string, secrets [][]byte) signer {
	return func(h http.Header, now time.Time, body []byte) {
		sigs := make([]string, len(secrets))
		for i, s := range secrets {
			sigs[i] = signature.Sign(s, id, now, body)
		}
		h.Set("Webhook-Id", id)
		h.Set("Webhook-Timestamp", strconv.FormatInt(now.Unix(), 10))
		h.Set("Webhook-Signature", strings.Join(sigs, " "))
	}
}

// falSigner signs as fal signs its webhooks (signature.SignFal), with key,
// for request requestID of fal user userID.
func falSigner(key ed25519.PrivateKey, requestID, userID string) signer {
	return func(h http.Header, now time.Time, body []byte) {
		signature.SignFal(h, key, requestID, userID, now, body)
	}
}

// call POSTs body to url, signed by sign.
func (e *endpoint) call(ctx context.Context, url string, now time.Time, body []byte, sign signer) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Pollux-Webhooks/1")
	sign(req.Header, now, body)
	resp, err := e.client.Do(req)
	if err != nil {
		var refused *RefusedError
		if errors.As(err, &refused) {
			return answer{err: refused}
		}
		return answer{err: errors.New(trimURLError(err))}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse))
	_ = resp.Body.Close()
	a := answer{status: resp.StatusCode}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		a.retryAfter = min(time.Duration(s)*time.Second, time.Hour)
	}
	return a
}

// trimURLError drops the method and URL net/http puts before a call's
// error: the URL may carry a token in its query.
var trimURLError = safehttp.TrimURLError

// circuits are an endpoint's circuit breakers, one per host (the
// submissions' endpoint has many hosts; a configured one, one).
type circuits struct {
	mu sync.Mutex
	m  map[string]*circuit
	// after failures in a row open a circuit, for cooldown first.
	after    int
	cooldown time.Duration
}

// circuit stops calls to a host that keeps failing: after a number of
// failures in a row (default 5) it opens for a cooldown (doubling from
// 5 s to 5 min while it keeps failing), during which deliveries wait
// without calling; then one call tries it (half open), and a success
// closes it.
type circuit struct {
	failures  int
	openUntil time.Time
	cooldown  time.Duration
	trying    bool // half open: a call is under way
}

// Defaults of the circuit breakers.
const (
	DefaultCircuitFailures = 5
	DefaultCircuitCooldown = 5 * time.Second
	maxCooldown            = 5 * time.Minute
)

func (cs *circuits) get(host string) *circuit {
	c := cs.m[host]
	if c == nil {
		c = &circuit{}
		cs.m[host] = c
	}
	return c
}

// allow reports how long a call to host must wait (0: call now).
func (cs *circuits) allow(host string, now time.Time) time.Duration {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.get(host)
	switch {
	case c.failures < cs.after:
		return 0
	case now.Before(c.openUntil):
		return c.openUntil.Sub(now)
	case c.trying:
		return c.cooldown // another call is trying it
	}
	c.trying = true
	return 0
}

// done records a call's outcome; it reports whether the circuit is open
// after it.
func (cs *circuits) done(host string, ok bool, now time.Time) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.get(host)
	c.trying = false
	if ok {
		*c = circuit{}
		return false
	}
	c.failures++
	if c.failures >= cs.after {
		c.cooldown = min(max(2*c.cooldown, cs.cooldown), maxCooldown)
		c.openUntil = now.Add(c.cooldown)
		return true
	}
	return false
}
