package config

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/pkg/events"
)

// Notify configures outbound webhooks: Pollux calling applications when
// their jobs change (package notify).
type Notify struct {
	// Endpoints are the applications' endpoints by name, at most 64; a
	// route names those that receive its jobs' events (Route.Notify;
	// default none).
	Endpoints map[string]Endpoint `yaml:"endpoints"`
	// Submissions, when set, lets a submission name an endpoint of its own
	// (notify_url, a Replicate face create's webhook, or a fal face
	// submit's fal_webhook), delivered with
	// these settings (its URL aside; default none: a submission cannot).
	// Its secrets also sign the Replicate face's webhooks, each token's
	// with a secret derived from them and its name, and the fal face's,
	// with an Ed25519 key derived from the first, whose JWKS (every
	// secret's key) the front door serves at /fal/.well-known/jwks.json
	// (docs/faces.md).
	Submissions *Endpoint `yaml:"submissions"`
}

// Endpoint is one application endpoint, or the settings of submissions'
// own.
type Endpoint struct {
	// URL is where events are POSTed (http or https); empty for
	// Notify.Submissions, whose URL each submission gives (required
	// otherwise).
	URL string `yaml:"url"`
	// SecretsEnv name the environment variables holding the whsec_
	// secrets deliveries are signed with (Standard Webhooks): one, or two
	// while rotating (each delivery is signed with every one; required,
	// at most 4).
	SecretsEnv []string `yaml:"secrets_env"`
	// Events is "all" (every event of a job, in order) or "terminal" (its
	// end only; default "all").
	Events string `yaml:"events"`
	// Timeout bounds one call, at most 5m (default 10s).
	Timeout time.Duration `yaml:"timeout"`
	// Workers is how many calls a process makes to the endpoint at once
	// (default 8, at most 256).
	Workers int `yaml:"workers"`
	// Horizon is how long a delivery is retried before it is given up, at
	// most 720h (default 24h).
	Horizon time.Duration `yaml:"horizon"`
	// AllowPrivate lets deliveries reach loopback, link-local and private
	// addresses (default false: refused, so a submitted URL cannot make
	// Pollux call into its own network).
	AllowPrivate bool `yaml:"allow_private"`
}

// Notify's event filters.
const (
	NotifyAll      = "all"
	NotifyTerminal = "terminal"
)

// maxEndpoints bounds the configured endpoints.
const maxEndpoints = 64

// NotifySubmissions is the endpoint name of submissions' own URLs.
const NotifySubmissions = "submission"

func (n Notify) validate() error {
	if len(n.Endpoints) > maxEndpoints {
		return fmt.Errorf("endpoints: %d, more than %d", len(n.Endpoints), maxEndpoints)
	}
	names := make([]string, 0, len(n.Endpoints))
	for name := range n.Endpoints {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !events.ValidToken(name) || name == NotifySubmissions {
			return fmt.Errorf("endpoints.%s: a name is 1-128 characters of [A-Za-z0-9_-], and not %q", name, NotifySubmissions)
		}
		e := n.Endpoints[name]
		if err := ValidNotifyURL(e.URL); err != nil {
			return fmt.Errorf("endpoints.%s.url: %w", name, err)
		}
		if err := e.validate(); err != nil {
			return fmt.Errorf("endpoints.%s.%w", name, err)
		}
	}
	if n.Submissions != nil {
		if n.Submissions.URL != "" {
			return errors.New("submissions.url: each submission gives its own (notify_url)")
		}
		if err := n.Submissions.validate(); err != nil {
			return fmt.Errorf("submissions.%w", err)
		}
	}
	return nil
}

func (e Endpoint) validate() error {
	switch {
	case len(e.SecretsEnv) == 0:
		return errors.New("secrets_env: at least one environment variable holding a whsec_ secret")
	case len(e.SecretsEnv) > 4:
		return errors.New("secrets_env: at most 4 (two are enough to rotate)")
	case e.Events != "" && e.Events != NotifyAll && e.Events != NotifyTerminal:
		return fmt.Errorf("events: %q is not %q or %q", e.Events, NotifyAll, NotifyTerminal)
	case e.Timeout < 0 || e.Timeout > 5*time.Minute:
		return fmt.Errorf("timeout: %s is not between 0 and 5m", e.Timeout)
	case e.Workers < 0 || e.Workers > 256:
		return fmt.Errorf("workers: %d is not between 0 and 256", e.Workers)
	case e.Horizon < 0 || e.Horizon > 30*24*time.Hour:
		return fmt.Errorf("horizon: %s is not between 0 and 720h", e.Horizon)
	}
	return nil
}

// Secrets returns the endpoint's secrets, read from their environment
// variables; an unset or empty one is an error naming it.
func (e Endpoint) Secrets() ([]string, error) {
	out := make([]string, 0, len(e.SecretsEnv))
	for _, name := range e.SecretsEnv {
		s, err := secret("notify secret", name, "")
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// maxNotifyURL is the longest endpoint URL.
const maxNotifyURL = 2048

// ValidNotifyURL checks an endpoint URL: absolute http or https, a host,
// no credentials, at most 2048 bytes. Whether its address may be called
// is decided when it is called (package notify).
func ValidNotifyURL(raw string) error {
	if raw == "" {
		return errors.New("required")
	}
	if len(raw) > maxNotifyURL {
		return fmt.Errorf("%d bytes, longer than %d", len(raw), maxNotifyURL)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("not a URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("scheme %q: want http or https", u.Scheme)
	case u.Host == "" || strings.HasPrefix(u.Host, ":"):
		return errors.New("no host")
	case u.User != nil:
		return errors.New("credentials in the URL: use a secret instead")
	}
	return nil
}
