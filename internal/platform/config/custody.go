package config

import (
	"errors"
	"time"
)

// KeepOutputs makes Pollux copy a route's succeeded jobs' outputs into
// its outputs bucket before the provider deletes them (package custody).
type KeepOutputs struct {
	// MaxBytes is the largest output kept, in bytes; a larger one is
	// recorded as too_large and not kept (default 512 MiB).
	MaxBytes int64 `yaml:"max_bytes"`
	// Timeout bounds one download (default 10m).
	Timeout time.Duration `yaml:"timeout"`
	// Horizon is how long, from the job's end, a failing copy is retried
	// when the provider gives no outputs_expire_at (default 24h); with
	// one, a copy is retried until then.
	Horizon time.Duration `yaml:"horizon"`
	// AllowPrivate lets downloads reach loopback, link-local and private
	// addresses (default false: refused, as outbound webhooks refuse
	// them, so a provider's answer cannot make Pollux fetch from its own
	// network).
	AllowPrivate bool `yaml:"allow_private"`
}

// Defaults of KeepOutputs.
const (
	DefaultKeepMaxBytes = 512 << 20
	DefaultKeepTimeout  = 10 * time.Minute
	DefaultKeepHorizon  = 24 * time.Hour
)

// WithDefaults fills the zero fields.
func (k KeepOutputs) WithDefaults() KeepOutputs {
	if k.MaxBytes == 0 {
		k.MaxBytes = DefaultKeepMaxBytes
	}
	if k.Timeout == 0 {
		k.Timeout = DefaultKeepTimeout
	}
	if k.Horizon == 0 {
		k.Horizon = DefaultKeepHorizon
	}
	return k
}

func (k KeepOutputs) validate() error {
	switch {
	case k.MaxBytes < 0:
		return errors.New("max_bytes: must not be negative")
	case k.Timeout < 0:
		return errors.New("timeout: must not be negative")
	case k.Horizon < 0:
		return errors.New("horizon: must not be negative")
	}
	return nil
}

// OutputProxy is how the front door fetches a route's outputs that it
// serves through itself rather than redirect an app to them: those of the
// faces whose SDK sends the app's key when it downloads in a header a
// redirect would carry to the provider (face.Proxied: genai) when Pollux
// keeps no copy (keep_outputs). The fetch
// forwards no credential and follows no redirect.
type OutputProxy struct {
	// MaxBytes is the largest output served so, in bytes; a larger one
	// is refused (default 512 MiB).
	MaxBytes int64 `yaml:"max_bytes"`
	// Timeout bounds one download (default 10m).
	Timeout time.Duration `yaml:"timeout"`
	// AllowPrivate lets the fetch reach loopback, link-local and private
	// addresses (default false: refused, so that an output URL a provider
	// answered cannot make the front door fetch from its own network).
	AllowPrivate bool `yaml:"allow_private"`
}

// WithDefaults fills the zero fields.
func (p OutputProxy) WithDefaults() OutputProxy {
	if p.MaxBytes == 0 {
		p.MaxBytes = DefaultKeepMaxBytes
	}
	if p.Timeout == 0 {
		p.Timeout = DefaultKeepTimeout
	}
	return p
}

func (p OutputProxy) validate() error {
	switch {
	case p.MaxBytes < 0:
		return errors.New("max_bytes: must not be negative")
	case p.Timeout < 0:
		return errors.New("timeout: must not be negative")
	}
	return nil
}

// Custody configures output custody across routes: the outputs_expiring
// warning. The custody worker runs (in the webhook processes) when this
// section is present or any route keeps its outputs; it then warns for
// every route's jobs.
type Custody struct {
	// ExpiringLead is how long before a succeeded job's outputs expire at
	// the provider (outputs_expire_at) an outputs_expiring event is
	// emitted when they are not saved (default 1h).
	ExpiringLead time.Duration `yaml:"expiring_lead"`
	// TTL is how long a kept output stays in the outputs bucket after it
	// was saved (default 720h, 30 days).
	TTL time.Duration `yaml:"ttl"`
}

// Defaults of Custody.
const (
	DefaultExpiringLead = time.Hour
	DefaultOutputsTTL   = 30 * 24 * time.Hour
)

func (c *Custody) validate() error {
	switch {
	case c == nil:
		return nil
	case c.ExpiringLead < 0:
		return errors.New("expiring_lead: must not be negative")
	case c.TTL < 0:
		return errors.New("ttl: must not be negative")
	}
	return nil
}

// CustodyEnabled reports whether the custody worker has anything to do:
// the custody section is present or a route keeps its outputs.
func (c *Config) CustodyEnabled() bool {
	if c.Custody != nil {
		return true
	}
	for _, r := range c.Routes {
		if r.KeepOutputs != nil {
			return true
		}
	}
	return false
}
