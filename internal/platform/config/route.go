// Package config reads Pollux's configuration file: the NATS connection, the
// subject prefix, stream sizing, and the provider routes. Secrets (API
// tokens, webhook secrets) come from environment variables or files named in
// the config, never from the file itself or from flags, and never reach a
// log line.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pollux-dev/pollux/pkg/events"
)

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
	// queueing across tenants, each tenant's in order (default none: the
	// submission's app is its tenant).
	TenantKey string `yaml:"tenant_key"`
	// TenantWeights are the tenants' shares when the route names no
	// account (default 1 each; an account's routes share the account's
	// weights).
	TenantWeights map[string]float64 `yaml:"tenant_weights"`
	// Prices are what the provider charges for a job, by model ("*": any
	// model not listed), for the apps' spend and budgets (see Price;
	// default none: the route's jobs count nothing).
	Prices map[string]Price `yaml:"prices"`
	// BillsFailed says the provider charges for a job that failed before
	// it started it (default false: such a job counts nothing).
	BillsFailed bool `yaml:"bills_failed"`
	// SpendBudgets are the most the route's jobs may cost, whichever apps
	// they are (default none: no limit). A create that would pass one is
	// refused until the period resets.
	SpendBudgets SpendBudgets `yaml:"spend_budgets"`
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
	// OutputProxy is how the front door fetches the route's outputs it
	// serves through itself (see OutputProxy; default: its defaults).
	OutputProxy OutputProxy `yaml:"output_proxy"`
	// KeepInputs keeps each job's input on its record after the provider
	// has the job, so that a job that failed there can be resubmitted as
	// it was (POST /v1/jobs/{id}/resubmit, pollux resubmit). Default
	// false: the input is dropped once the provider accepted the job,
	// keeping every later write of the record small; a resubmission of
	// such a job must then give the input again.
	KeepInputs bool `yaml:"keep_inputs"`
	// Faces are the provider faces the front door serves for this route,
	// so an application using that provider's SDK submits here by
	// changing only its base URL: replicate, fal, openai, genai, runway,
	// luma (default none; see docs/faces.md).
	Faces []string `yaml:"faces"`
	// Inputs is how the route's provider is given the input files its
	// jobs name (default: as signed URLs on inputs.public_url).
	Inputs RouteInputs `yaml:"inputs"`
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

// maxSettingsFrom bounds a route's settings_from fields.
const maxSettingsFrom = 8

func (r Route) validate() error {
	if err := validFaces(r.Faces); err != nil {
		return err
	}
	switch {
	case r.Kind == "":
		return errors.New("kind: required")
	case r.Inputs.InlineMaxBytes < 0:
		return errors.New("inputs.inline_max_bytes: must not be negative")
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

// FaceKinds are the faces a route may name; the front door's face
// package defines each.
var FaceKinds = []string{"replicate", "fal", "openai", "genai", "runway", "luma"}

// validFaces checks a route's faces: known, each once.
func validFaces(faces []string) error {
	for i, f := range faces {
		if !slices.Contains(FaceKinds, f) {
			return fmt.Errorf("faces: %q is not a face (%s)", f, strings.Join(FaceKinds, ", "))
		}
		if slices.Contains(faces[:i], f) {
			return fmt.Errorf("faces: %q given twice", f)
		}
	}
	return nil
}
