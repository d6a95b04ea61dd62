// Package config reads Pollux's configuration file: the NATS connection, the
// subject prefix, stream sizing, and the provider routes. Secrets (API
// tokens, webhook secrets) come from environment variables or files named in
// the config, never from the file itself or from flags, and never reach a
// log line.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pollux-dev/pollux/pkg/events"
)

// Config is the whole configuration file.
type Config struct {
	// Prefix is the subject prefix (default "pollux").
	Prefix string `yaml:"prefix"`
	// NATS is the connection (flags and environment override the URL).
	NATS NATS `yaml:"nats"`
	// Streams sizes the streams and buckets.
	Streams Streams `yaml:"streams"`
	// Budgets are the global level: limits on everything Pollux calls,
	// whatever the route or account.
	Budgets Budgets `yaml:"budgets"`
	// Accounts are the provider accounts by name: limits shared by every
	// route that names the account.
	Accounts map[string]Account `yaml:"accounts"`
	// RunningRepair tunes the repair of running slots no job holds.
	RunningRepair RunningRepair `yaml:"running_repair"`
	// Routes are the provider routes by name.
	Routes map[string]Route `yaml:"routes"`
	// ModelRoutes are routes that serve one model through several
	// provider routes, by name (see ModelRoute). Their names share the
	// routes' namespace: a submission to one is routed per job.
	ModelRoutes map[string]ModelRoute `yaml:"model_routes"`
	// Notify configures outbound webhooks to applications.
	Notify Notify `yaml:"notify"`
	// Custody configures the outputs_expiring warning (see Custody;
	// default none: the defaults, where a route keeps its outputs).
	Custody *Custody `yaml:"custody"`
	// Inputs configures the input files uploaded through the faces.
	Inputs Inputs `yaml:"inputs"`
	// Apps are the applications that share this Pollux, by name (see
	// App; default none: any app a token or submission names).
	Apps map[string]App `yaml:"apps"`
}

// ModelRoute serves one model through several provider routes (Kling
// through an aggregator and through Kling's own API, say): a submission to
// it goes to the member Pollux expects to finish it soonest, by what it
// learned of each — completion time, failures, pauses, waiting room —
// within the submission's deadline.
type ModelRoute struct {
	// Members are the provider routes and the model's id on each, in order
	// of preference while nothing is learned.
	Members []ModelRouteMember `yaml:"members"`
	// Hedge submits a job to the next member as well when its learned
	// distribution says it will miss its deadline, and cancels the loser
	// where its provider can cancel (default false).
	Hedge bool `yaml:"hedge"`
	// HedgeBelow is the chance of meeting the deadline under which a job
	// is hedged (default 0.5).
	HedgeBelow float64 `yaml:"hedge_below"`
	// Explore is the share of jobs sent to a member other than the best,
	// so that what is learned of every member stays current (default
	// 0.05; 0 < explore ≤ 0.5, or -1 for none).
	Explore float64 `yaml:"explore"`
	// Faces are the provider faces the front door serves for this model
	// route, as a route's (default none).
	Faces []string `yaml:"faces"`
}

// ModelRouteMember is one provider route of a model route.
type ModelRouteMember struct {
	// Route names a configured route (required).
	Route string `yaml:"route"`
	// Model is the model's id on that route's provider (required).
	Model string `yaml:"model"`
}

// maxMembers bounds a model route's members.
const maxMembers = 8

func (m ModelRoute) validate(routes map[string]Route) error {
	if err := validFaces(m.Faces); err != nil {
		return err
	}
	switch {
	case len(m.Members) < 2:
		return errors.New("members: a model route needs at least 2 members")
	case len(m.Members) > maxMembers:
		return fmt.Errorf("members: %d, more than %d", len(m.Members), maxMembers)
	case m.Hedge && m.HedgeBelow != 0 && !(m.HedgeBelow > 0 && m.HedgeBelow < 1):
		return fmt.Errorf("hedge_below: %v is not between 0 and 1", m.HedgeBelow)
	case m.Explore != 0 && m.Explore != -1 && !(m.Explore > 0 && m.Explore <= 0.5):
		return fmt.Errorf("explore: %v is not in (0, 0.5], nor -1 for none", m.Explore)
	}
	seen := map[string]bool{}
	for i, mb := range m.Members {
		switch _, ok := routes[mb.Route]; {
		case !ok:
			return fmt.Errorf("members[%d].route: no route named %q under routes", i, mb.Route)
		case seen[mb.Route]:
			return fmt.Errorf("members[%d].route: %q is a member twice", i, mb.Route)
		case mb.Model == "" || len(mb.Model) > events.MaxModelLen:
			return fmt.Errorf("members[%d].model: must have 1 to %d characters", i, events.MaxModelLen)
		}
		seen[mb.Route] = true
	}
	return nil
}

// RunningRepair tunes how running slots left by a process that died are
// found and freed (see budget.Running.Repair).
type RunningRepair struct {
	// Interval is how often every ingest process looks (default 30s).
	Interval time.Duration `yaml:"interval"`
	// Grace is how old a slot no job record names must be before it is
	// freed (default 2m): longer than a take and the write recording it.
	Grace time.Duration `yaml:"grace"`
}

// Account is one provider account that any number of routes reach (one
// per model family, say, or two hosts billing one account). The routes'
// tokens may differ; its budgets are shared by all of them.
type Account struct {
	// Budgets are the account's limits.
	Budgets Budgets `yaml:"budgets"`
	// SpendBudgets are the most the jobs of all its routes may cost,
	// whichever apps they are (default none: no limit). A create that
	// would pass one is refused until the period resets.
	SpendBudgets SpendBudgets `yaml:"spend_budgets"`
	// TenantWeights are the tenants' shares of the account's running slots
	// when submissions wait for them (default 1 each; see
	// Route.TenantKey).
	TenantWeights map[string]float64 `yaml:"tenant_weights"`
}

// NATS is the connection to the NATS server. Use at most one way of
// authenticating: a credentials file, an NKey seed file, a user and
// password, or a token. Secrets are read from the environment variables
// or files named here.
type NATS struct {
	// URL of the server(s), comma-separated (default nats://127.0.0.1:4222).
	URL string `yaml:"url"`
	// CredsFile is a NATS credentials file (JWT and NKey seed; default
	// none).
	CredsFile string `yaml:"creds_file"`
	// NKeyFile is an NKey seed file (default none).
	NKeyFile string `yaml:"nkey_file"`
	// User is the NATS user, with its password from PasswordEnv or
	// PasswordFile (default none).
	User string `yaml:"user"`
	// PasswordEnv names the environment variable holding User's password
	// (default none).
	PasswordEnv string `yaml:"password_env"`
	// PasswordFile names the file holding User's password (default none).
	PasswordFile string `yaml:"password_file"`
	// TokenEnv names the environment variable holding the server's auth
	// token (default none).
	TokenEnv string `yaml:"token_env"`
	// TokenFile names the file holding the server's auth token (default
	// none).
	TokenFile string `yaml:"token_file"`
	// TLS secures the connection (default none: plain TCP).
	TLS TLS `yaml:"tls"`
}

// TLS configures a TLS connection to NATS.
type TLS struct {
	// CAFile verifies the server (default: the system's roots).
	CAFile string `yaml:"ca_file"`
	// CertFile is the client's certificate, given with KeyFile for mutual
	// TLS (default none).
	CertFile string `yaml:"cert_file"`
	// KeyFile is the client certificate's private key (default none).
	KeyFile string `yaml:"key_file"`
}

// Enabled reports whether any TLS setting is given.
func (t TLS) Enabled() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// Password returns the NATS user's password.
func (n NATS) Password() (string, error) {
	return secret("nats password", n.PasswordEnv, n.PasswordFile)
}

// Token returns the NATS auth token.
func (n NATS) Token() (string, error) { return secret("nats token", n.TokenEnv, n.TokenFile) }

func (n NATS) validate() error {
	ways := 0
	for _, set := range []bool{n.CredsFile != "", n.NKeyFile != "", n.User != "", n.TokenEnv != "" || n.TokenFile != ""} {
		if set {
			ways++
		}
	}
	switch {
	case ways > 1:
		return errors.New("give one of creds_file, nkey_file, user (with a password) or token_env/token_file")
	case n.PasswordEnv != "" && n.PasswordFile != "":
		return errors.New("password_env: give password_env or password_file, not both")
	case n.TokenEnv != "" && n.TokenFile != "":
		return errors.New("token_env: give token_env or token_file, not both")
	case (n.PasswordEnv != "" || n.PasswordFile != "") && n.User == "":
		return errors.New("user: required with a password")
	case (n.TLS.CertFile == "") != (n.TLS.KeyFile == ""):
		return errors.New("tls: give cert_file and key_file together")
	}
	return nil
}

// Streams sizes the JetStream resources (see events.Options for defaults).
type Streams struct {
	// Replicas of every stream, bucket and consumer, 1 to 5 (default 1;
	// 3 in a cluster).
	Replicas int `yaml:"replicas"`
	// MemoryStorage keeps everything in memory, for tests (default false:
	// file storage).
	MemoryStorage bool `yaml:"memory_storage"`
	// IntakeMaxBytes caps unprocessed intake; when full, publishing fails
	// (back-pressure) rather than dropping accepted work (default 1 GiB).
	IntakeMaxBytes int64 `yaml:"intake_max_bytes"`
	// EventsMaxAge is how long events are kept for replay (default 7
	// days).
	EventsMaxAge time.Duration `yaml:"events_max_age"`
	// EventsMaxBytes caps the events stream; the oldest events go first
	// (default 10 GiB).
	EventsMaxBytes int64 `yaml:"events_max_bytes"`
	// WebhookDuplicates is the webhook stream's duplicate window: a
	// delivery id seen within it is dropped (default 72h, the longest
	// provider retry horizon).
	WebhookDuplicates time.Duration `yaml:"webhook_duplicates"`
	// JobsTTL is how long a job record outlives its last write; it is
	// also how long an idempotency key deduplicates after the job ends
	// (default 7 days).
	JobsTTL time.Duration `yaml:"jobs_ttl"`
	// IntakeAckWait is how long an intake message taken by a process that
	// died waits before another process takes it (default 60s); a live
	// process keeps the messages it works on.
	IntakeAckWait time.Duration `yaml:"intake_ack_wait"`
	// CheckAckWait is the same for check messages (default 30s).
	CheckAckWait time.Duration `yaml:"check_ack_wait"`
	// ParkAfter is the shortest wait before a job's next poll that parks
	// its check (events.Options.ParkAfter; default 1m, at least 15s; a
	// negative value never parks).
	ParkAfter time.Duration `yaml:"park_after"`
	// SweepInterval is how often every consumer looks for messages its
	// work-queue stream kept after they were acknowledged (see
	// internal/core/consume; default 30s).
	SweepInterval time.Duration `yaml:"sweep_interval"`
}

// Options converts to the contract's stream options.
func (s Streams) Options() events.Options {
	return events.Options{
		Replicas: s.Replicas, MemoryStorage: s.MemoryStorage, IntakeMaxBytes: s.IntakeMaxBytes,
		EventsMaxAge: s.EventsMaxAge, EventsMaxBytes: s.EventsMaxBytes,
		WebhookDuplicates: s.WebhookDuplicates, JobsTTL: s.JobsTTL,
		IntakeAckWait: s.IntakeAckWait, CheckAckWait: s.CheckAckWait, ParkAfter: s.ParkAfter,
	}
}

// Load reads and validates a configuration file (YAML or JSON; unknown
// fields are errors).
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer func() { _ = f.Close() }()
	c, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse reads and validates a configuration.
func Parse(r io.Reader) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, 1<<20+1))
	if err != nil {
		return nil, err
	}
	if len(data) > 1<<20 {
		return nil, errors.New("larger than 1 MiB")
	}
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks the configuration and names the first bad field.
func (c *Config) Validate() error {
	if _, err := events.NewNamespace(c.Prefix); err != nil {
		return fmt.Errorf("prefix: %w", err)
	}
	if err := c.NATS.validate(); err != nil {
		return fmt.Errorf("nats.%w", err)
	}
	if c.Streams.Replicas != 0 && (c.Streams.Replicas < 1 || c.Streams.Replicas > 5) {
		return fmt.Errorf("streams.replicas: %d is not between 1 and 5", c.Streams.Replicas)
	}
	if pa := c.Streams.ParkAfter; pa > 0 && pa < events.MinParkAfter {
		return fmt.Errorf("streams.park_after: %s is too short: a parked check fires %s before its poll; at least %s, or negative to never park",
			pa, events.ParkedLead, events.MinParkAfter)
	}
	if c.RunningRepair.Interval < 0 || c.RunningRepair.Grace < 0 {
		return errors.New("running_repair: durations must not be negative")
	}
	if g := c.RunningRepair.Grace; g != 0 && g < 5*time.Second {
		return fmt.Errorf("running_repair.grace: %s is too short to let a take's write land; at least 5s", g)
	}
	if err := c.Budgets.validate(); err != nil {
		return fmt.Errorf("budgets: %w", err)
	}
	if err := c.validateApps(); err != nil {
		return err
	}
	for _, name := range sortedKeys(c.Accounts) {
		if !events.ValidToken(name) {
			return fmt.Errorf("accounts.%s: an account name must be 1-128 characters of [A-Za-z0-9_-]", name)
		}
		if err := c.Accounts[name].Budgets.validate(); err != nil {
			return fmt.Errorf("accounts.%s.budgets: %w", name, err)
		}
		if err := validWeights(c.Accounts[name].TenantWeights); err != nil {
			return fmt.Errorf("accounts.%s.tenant_weights: %w", name, err)
		}
	}
	if len(c.Routes) == 0 {
		return errors.New("routes: at least one route is required")
	}
	for _, name := range c.RouteNames() {
		if err := c.Routes[name].validate(); err != nil {
			return fmt.Errorf("routes.%s.%w", name, err)
		}
		if !events.ValidToken(name) {
			return fmt.Errorf("routes.%s: a route name must be 1-128 characters of [A-Za-z0-9_-]", name)
		}
		if a := c.Routes[name].Account; a != "" {
			if _, ok := c.Accounts[a]; !ok {
				return fmt.Errorf("routes.%s.account: no account named %q under accounts", name, a)
			}
		}
	}
	if err := c.Notify.validate(); err != nil {
		return fmt.Errorf("notify.%w", err)
	}
	if err := c.Inputs.validate(); err != nil {
		return fmt.Errorf("inputs.%w", err)
	}
	if err := c.Custody.validate(); err != nil {
		return fmt.Errorf("custody.%w", err)
	}
	for _, rn := range c.RouteNames() {
		if k := c.Routes[rn].KeepOutputs; k != nil {
			if err := k.validate(); err != nil {
				return fmt.Errorf("routes.%s.keep_outputs.%w", rn, err)
			}
		}
		if err := c.Routes[rn].OutputProxy.validate(); err != nil {
			return fmt.Errorf("routes.%s.output_proxy.%w", rn, err)
		}
	}
	for _, rn := range c.RouteNames() {
		for _, e := range c.Routes[rn].Notify {
			if _, ok := c.Notify.Endpoints[e]; !ok {
				return fmt.Errorf("routes.%s.notify: no endpoint named %q under notify.endpoints", rn, e)
			}
		}
	}
	for _, name := range sortedKeys(c.ModelRoutes) {
		switch _, clash := c.Routes[name]; {
		case !events.ValidToken(name):
			return fmt.Errorf("model_routes.%s: a name must be 1-128 characters of [A-Za-z0-9_-]", name)
		case clash:
			return fmt.Errorf("model_routes.%s: a route has that name too; the names share one namespace", name)
		}
		if err := c.ModelRoutes[name].validate(c.Routes); err != nil {
			return fmt.Errorf("model_routes.%s.%w", name, err)
		}
	}
	return nil
}

// RouteNames lists the route names in order.
func (c *Config) RouteNames() []string { return sortedKeys(c.Routes) }

func sortedKeys[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func secret(what, env, file string) (string, error) {
	switch {
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok || strings.TrimSpace(v) == "" {
			return "", fmt.Errorf("%s: environment variable %s is not set", what, env)
		}
		return strings.TrimSpace(v), nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("%s: file %s is empty", what, file)
		}
		return v, nil
	}
	return "", nil
}
