// Package config reads Pollux's configuration file: the NATS connection, the
// subject prefix, stream sizing, and the provider routes. Secrets (API
// tokens, webhook secrets) come from environment variables or files named in
// the config, never from the file itself or from flags, and never reach a
// log line.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
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

// Route is one way to a provider: an adapter, its token and settings, and
// the account it spends.
type Route struct {
	// Kind selects the adapter (required: replicate, fal, runway, veo,
	// atlas, generic, sim, ...; see docs/providers.md).
	Kind string `yaml:"kind"`
	// Account names the provider account the route spends (one of
	// Config.Accounts; default none: the route's only limits are its
	// own).
	Account string `yaml:"account"`
	// TenantKey names the submission metadata key that carries its tenant:
	// submissions waiting for running slots are admitted by weighted fair
	// queueing across tenants, each tenant's in order (default none: one
	// tenant).
	TenantKey string `yaml:"tenant_key"`
	// TenantWeights are the tenants' shares when the route names no
	// account (default 1 each; an account's routes share the account's
	// weights).
	TenantWeights map[string]float64 `yaml:"tenant_weights"`
	// BaseURL overrides the provider's API URL (default: the adapter's).
	BaseURL string `yaml:"base_url"`
	// TokenEnv names the environment variable holding the API token
	// (default none; give it or TokenFile where the provider needs one).
	TokenEnv string `yaml:"token_env"`
	// TokenFile names the file holding the API token (default none).
	TokenFile string `yaml:"token_file"`
	// WebhookSecretEnv names the environment variable holding the webhook
	// signing secret (default none; optional: some adapters fetch it).
	WebhookSecretEnv string `yaml:"webhook_secret_env"`
	// WebhookSecretFile names the file holding the webhook signing secret
	// (default none).
	WebhookSecretFile string `yaml:"webhook_secret_file"`
	// CallbackSecretEnv names the environment variable holding a secret
	// (any string of 16 bytes or more) that signs the per-job token Pollux
	// puts in the callback URLs of providers whose callbacks are unsigned
	// (default none: their callbacks are accepted without a token).
	CallbackSecretEnv string `yaml:"callback_secret_env"`
	// CallbackSecretFile names the file holding that callback secret
	// (default none).
	CallbackSecretFile string `yaml:"callback_secret_file"`
	// WebhookURL is the public URL of this route's webhook endpoint
	// (cmd/webhook's /webhooks/<route>; default none: no webhook is asked
	// for).
	WebhookURL string `yaml:"webhook_url"`
	// Deadline is a job's deadline when the submission gives none (default
	// 1h).
	Deadline time.Duration `yaml:"deadline"`
	// MaxDeadline is the furthest deadline a submission may ask for
	// (default 24h).
	MaxDeadline time.Duration `yaml:"max_deadline"`
	// Workers is the per-process concurrency.
	Workers Workers `yaml:"workers"`
	// Budgets are the fleet-wide limits on calls to the provider (default
	// none: unlimited).
	Budgets Budgets `yaml:"budgets"`
	// Poll tunes the schedule.
	Poll Poll `yaml:"poll"`
	// NotFoundLimit is how many consecutive "unknown job" answers mark a job
	// lost (default 3).
	NotFoundLimit int `yaml:"not_found_limit"`
	// CancelOnDeadline asks the provider to cancel a job Pollux expired at
	// its deadline, so it stops paying for work nobody waits for (default
	// true; where the adapter cannot cancel, nothing is asked). Set it to
	// false where a late result is still worth having, or cancels cost.
	CancelOnDeadline *bool `yaml:"cancel_on_deadline"`
	// SettingsFrom names the top-level input fields whose values make a
	// submission's configuration key when it gives none (for example
	// [resolution, duration]): jobs of one model learn their durations
	// apart per setting (default none: one distribution per model).
	SettingsFrom []string `yaml:"settings_from"`
	// Notify names the endpoints (Config.Notify.Endpoints) that receive
	// the events of the route's jobs (default none).
	Notify []string `yaml:"notify"`
	// KeepOutputs, when set, copies the route's succeeded jobs' outputs
	// into Pollux's outputs bucket (default nil: outputs are left at the
	// provider).
	KeepOutputs *KeepOutputs `yaml:"keep_outputs"`
	// KeepInputs keeps each job's input on its record after the provider
	// has the job, so that a job that failed there can be resubmitted as
	// it was (POST /v1/jobs/{id}/resubmit, pollux resubmit). Default
	// false: the input is dropped once the provider accepted the job,
	// keeping every later write of the record small; a resubmission of
	// such a job must then give the input again.
	KeepInputs bool `yaml:"keep_inputs"`
	// LengthFrom names the top-level input field holding the output
	// length a submission asks for, in seconds (for example duration): a
	// number, or a string such as "5" or "5s". The model's learned
	// durations are then regressed on it, so a length seldom or never
	// seen is planned around its own expected time (default none).
	LengthFrom string `yaml:"length_from"`
	// Partitions splits the route's check messages over this many durable
	// consumers (1 to 64, default 1). The server's redelivery scan costs
	// O(waiting checks) per consumer, so plan a partition per ~100k
	// tracked jobs. Changing it needs no migration: the last poller to
	// start with a new value repartitions, and the others follow.
	Partitions int `yaml:"partitions"`
	// CallTimeout bounds each call to the provider (default 20s for status
	// and cancel calls, 30s for submits).
	CallTimeout time.Duration `yaml:"call_timeout"`
	// WebhookMaxBody caps a webhook delivery (default 1 MiB).
	WebhookMaxBody int64 `yaml:"webhook_max_body"`
	// Options are the adapter's own settings (default none; see
	// docs/providers.md).
	Options map[string]any `yaml:"options"`
}

// Workers is a route's per-process concurrency.
type Workers struct {
	// Submit calls in flight per ingest process (default 4).
	Submit int `yaml:"submit"`
	// Status calls in flight per poller process (default 16).
	Status int `yaml:"status"`
}

// Budgets are the fleet-wide limits of one level (global, account or
// route): submit calls, status calls (cancels and lookups count as status
// calls), and jobs running at the provider. Unset means unlimited, and
// costs nothing.
type Budgets struct {
	// Submit limits submit calls (default none: unlimited).
	Submit Budget `yaml:"submit"`
	// Status limits status calls, cancels and lookups (default none:
	// unlimited).
	Status Budget `yaml:"status"`
	// Running caps the jobs created at the provider and not yet ended,
	// up to 100000 (default none: unlimited). A submission past it waits
	// in JetStream for a job to end.
	Running int `yaml:"running"`
	// LearnRunning learns the level's running cap from the provider: a
	// create refused with a rate limit that names no Retry-After lowers it
	// to one below the jobs running then, and it rises by one after
	// budget.ProbeEvery creates accepted in a row at the cap, never above
	// Running (default false; Running unset: no cap to start from).
	LearnRunning bool `yaml:"learn_running"`
	// LearnRate learns the level's call rates (submit and status apart)
	// from the provider: a call refused with a rate limit that names no
	// Retry-After lowers the rate to budget.Decrease of what it was,
	// fleet-wide; it rises by budget.Increase every budget.IncreaseEvery while
	// calls wait for it and none is refused, never above a configured
	// rate (default false; no rate set: no rate to start from).
	LearnRate bool `yaml:"learn_rate"`
}

// MaxRunning is the largest running cap.
const MaxRunning = 100_000

func (b Budgets) validate() error {
	switch {
	case b.Submit.Concurrency < 0 || b.Status.Concurrency < 0:
		return errors.New("concurrency must not be negative")
	case b.Submit.Concurrency > 10_000 || b.Status.Concurrency > 10_000:
		return errors.New("concurrency above 10000 is no limit; leave it unset")
	case b.Submit.LeaseWait < 0 || b.Status.LeaseWait < 0:
		return errors.New("lease_wait must not be negative")
	case b.Running < 0:
		return errors.New("running must not be negative")
	case b.Running > MaxRunning:
		return fmt.Errorf("running above %d is no limit; leave it unset", MaxRunning)
	}
	return nil
}

// Budget is one fleet-wide limit.
type Budget struct {
	// Concurrency caps the calls in flight across all processes, up to
	// 10000 (default none: unlimited).
	Concurrency int `yaml:"concurrency"`
	// Rate caps the calls per time unit across all processes: "10/s",
	// "600/min", "3000/min", "20/s", or a number of calls per second
	// (default none: unlimited).
	Rate Rate `yaml:"rate"`
	// LeaseWait is how long a call slot held by a process that died stays
	// taken before it returns on its own (default 60s); longer calls
	// extend their slot.
	LeaseWait time.Duration `yaml:"lease_wait"`
}

// Rate is calls per second, written "N/s", "N/min", "N/h" or as a number.
type Rate float64

// UnmarshalYAML reads a rate.
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseRate(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*r = v
	return nil
}

// ParseRate reads "N/s", "N/min", "N/h" or a plain number (per second).
func ParseRate(s string) (Rate, error) {
	num, unit, _ := strings.Cut(strings.TrimSpace(s), "/")
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("rate %q: want a number of calls per s, min or h, such as 600/min", s)
	}
	switch strings.TrimSpace(unit) {
	case "", "s", "sec", "second":
	case "m", "min", "minute":
		v /= 60
	case "h", "hour":
		v /= 3600
	default:
		return 0, fmt.Errorf("rate %q: unknown unit %q (s, min or h)", s, unit)
	}
	return Rate(v), nil
}

// Poll tunes a route's schedule (see schedule.Policy for defaults).
type Poll struct {
	// MaxDelay is the longest interval between polls: the notification
	// delay the route tolerates (default 60s). It caps every gap, the
	// cold start's first poll and a provider's poll-after hint included;
	// only a job expecting a webhook waits longer, as the provider will
	// call.
	MaxDelay time.Duration `yaml:"max_delay"`
	// MinDelay is the shortest interval between polls (default 1s).
	MinDelay time.Duration `yaml:"min_delay"`
	// Jitter spreads each delay uniformly by ±jitter, in [0, 1) (default
	// 0.2).
	Jitter float64 `yaml:"jitter"`
	// WebhookGrace is how long past the expected completion a job
	// expecting a webhook waits before its first reconciliation poll
	// (default 30s); with a learned miss chance, the longest it waits.
	WebhookGrace time.Duration `yaml:"webhook_grace"`
	// Reconcile is the interval of reconciliation polls for a job
	// expecting a webhook (default max_delay); with a learned miss
	// chance, the longest interval.
	Reconcile time.Duration `yaml:"reconcile"`
	// ErrorBase is the first delay after a failed call, doubling with
	// each further failure up to max_delay (default 2s).
	ErrorBase time.Duration `yaml:"error_base"`
	// PollCost is what one poll is worth in detection delay: the learned
	// schedule minimises polls + delay/poll_cost (default 2s).
	PollCost time.Duration `yaml:"poll_cost"`
	// MinSamples is how many jobs (effective, recent ones weighing most)
	// a model needs before its learned durations replace the table
	// (default 20).
	MinSamples float64 `yaml:"min_samples"`
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
	if err := c.Custody.validate(); err != nil {
		return fmt.Errorf("custody.%w", err)
	}
	for _, rn := range c.RouteNames() {
		if k := c.Routes[rn].KeepOutputs; k != nil {
			if err := k.validate(); err != nil {
				return fmt.Errorf("routes.%s.keep_outputs.%w", rn, err)
			}
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

// maxSettingsFrom bounds a route's settings_from fields.
const maxSettingsFrom = 8

func (r Route) validate() error {
	switch {
	case r.Kind == "":
		return errors.New("kind: required")
	case r.TokenEnv != "" && r.TokenFile != "":
		return errors.New("token_env: give token_env or token_file, not both")
	case r.WebhookSecretEnv != "" && r.WebhookSecretFile != "":
		return errors.New("webhook_secret_env: give webhook_secret_env or webhook_secret_file, not both")
	case r.CallbackSecretEnv != "" && r.CallbackSecretFile != "":
		return errors.New("callback_secret_env: give callback_secret_env or callback_secret_file, not both")
	case r.Deadline < 0, r.MaxDeadline < 0:
		return errors.New("deadline: must not be negative")
	case r.MaxDeadline != 0 && r.Deadline > r.MaxDeadline:
		return fmt.Errorf("deadline: %s is beyond max_deadline %s", r.Deadline, r.MaxDeadline)
	case r.Workers.Submit < 0 || r.Workers.Status < 0:
		return errors.New("workers: must not be negative")
	case r.Budgets.validate() != nil:
		return fmt.Errorf("budgets: %w", r.Budgets.validate())
	case len(r.TenantKey) > events.MaxMetadataKey:
		return fmt.Errorf("tenant_key: longer than %d bytes", events.MaxMetadataKey)
	case validWeights(r.TenantWeights) != nil:
		return fmt.Errorf("tenant_weights: %w", validWeights(r.TenantWeights))
	case r.Account != "" && len(r.TenantWeights) > 0:
		return errors.New("tenant_weights: the route's account shares its weights (accounts.<name>.tenant_weights)")
	case r.NotFoundLimit < 0:
		return errors.New("not_found_limit: must not be negative")
	case len(r.SettingsFrom) > maxSettingsFrom:
		return fmt.Errorf("settings_from: %d fields, more than %d", len(r.SettingsFrom), maxSettingsFrom)
	case slices.ContainsFunc(r.SettingsFrom, func(f string) bool { return f == "" || len(f) > 64 }):
		return errors.New("settings_from: each field name must have 1 to 64 characters")
	case len(r.LengthFrom) > 64:
		return errors.New("length_from: the field name must have 1 to 64 characters")
	case r.Partitions < 0 || r.Partitions > events.CheckSlots:
		return fmt.Errorf("partitions: %d is not between 1 and %d", r.Partitions, events.CheckSlots)
	case r.CallTimeout < 0:
		return errors.New("call_timeout: must not be negative")
	case r.Poll.Jitter < 0 || r.Poll.Jitter >= 1:
		return fmt.Errorf("poll.jitter: %v is not in [0, 1)", r.Poll.Jitter)
	case r.Poll.MaxDelay < 0 || r.Poll.MinDelay < 0 || r.Poll.Reconcile < 0 || r.Poll.WebhookGrace < 0 || r.Poll.PollCost < 0 || r.Poll.MinSamples < 0:
		return errors.New("poll: durations must not be negative")
	case r.Poll.MaxDelay != 0 && r.Poll.MinDelay > r.Poll.MaxDelay:
		return errors.New("poll.min_delay: larger than poll.max_delay")
	case r.WebhookURL != "" && !strings.HasPrefix(r.WebhookURL, "https://") && !strings.HasPrefix(r.WebhookURL, "http://"):
		return fmt.Errorf("webhook_url: %q is not an http(s) URL", r.WebhookURL)
	case r.WebhookMaxBody < 0:
		return errors.New("webhook_max_body: must not be negative")
	}
	return nil
}

func validWeights(w map[string]float64) error {
	for tenant, v := range w {
		if !(v > 0 && v <= 1000) {
			return fmt.Errorf("%s: %v is not in (0, 1000]", tenant, v)
		}
	}
	return nil
}

// Token returns the route's API token from its environment variable or file.
func (r Route) Token() (string, error) {
	return secret("token", r.TokenEnv, r.TokenFile)
}

// CallbackSecret returns the route's callback secret, "" when none is set.
func (r Route) CallbackSecret() (string, error) {
	return secret("callback secret", r.CallbackSecretEnv, r.CallbackSecretFile)
}

// WebhookSecret returns the route's webhook secret, "" when none is set.
func (r Route) WebhookSecret() (string, error) {
	return secret("webhook secret", r.WebhookSecretEnv, r.WebhookSecretFile)
}

// OptionsJSON returns the adapter options as JSON.
func (r Route) OptionsJSON() (json.RawMessage, error) {
	if len(r.Options) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(r.Options)
	if err != nil {
		return nil, fmt.Errorf("options: %w", err)
	}
	return b, nil
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
