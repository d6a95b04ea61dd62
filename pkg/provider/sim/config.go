package sim

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v3"
)

// Defaults applied by New to zero-valued fields.
const (
	DefaultQueueMedian     = 5 * time.Second        // Model.QueueMedian
	DefaultRunMedian       = 60 * time.Second       // Model.RunMedian
	DefaultRetryAfter      = time.Second            // Faults.RetryAfter
	DefaultRetryAfterGrace = 200 * time.Millisecond // Faults.RetryAfterGrace
	DefaultWebhookLateBy   = 5 * time.Second        // Faults.WebhookLateBy
	DefaultHangFor         = 30 * time.Second       // Faults.HangFor
	DefaultWebhookTimeout  = 5 * time.Second        // timeout of the default Config.HTTPClient
)

// Duration is a time.Duration that reads and writes as a Go duration string
// ("90s", "2m", "1h30m"). It also reads a plain number as seconds, in JSON
// (90, 1.5), in YAML (90) and in strings ("90").
type Duration time.Duration

// String formats the duration like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as a string such as "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := parseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("duration: want a string like \"90s\" or a number of seconds, got %s", b)
	}
	v, err := secondsToDuration(f)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a string such as "1m30s".
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads a duration string or a number of seconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: duration: want a string like \"90s\" or a number of seconds", n.Line)
	}
	v, err := parseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// parseDuration reads "90s"-style durations and bare numbers of seconds.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return secondsToDuration(f)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want a Go duration like \"90s\" or a number of seconds", s)
	}
	return v, nil
}

func secondsToDuration(f float64) (time.Duration, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > float64(math.MaxInt64)/float64(time.Second) {
		return 0, fmt.Errorf("duration %v s is out of range", f)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// Model describes how long predictions of one model take and how they end.
// Durations are virtual: they are divided by Config.TimeScale.
type Model struct {
	// QueueMedian is the median time a prediction spends "starting"; the
	// time is lognormal with this median. Default DefaultQueueMedian.
	QueueMedian Duration `json:"queue_median" yaml:"queue_median"`
	// QueueSigma is the lognormal sigma of the queue time; 0 (the default)
	// makes every queue time equal to the median.
	QueueSigma float64 `json:"queue_sigma" yaml:"queue_sigma"`
	// RunMedian is the median time a prediction spends "processing".
	// Default DefaultRunMedian.
	RunMedian Duration `json:"run_median" yaml:"run_median"`
	// RunSigma is the lognormal sigma of the run time; default 0.
	RunSigma float64 `json:"run_sigma" yaml:"run_sigma"`
	// FailRate is the share of predictions that end "failed"; default 0.
	FailRate float64 `json:"fail_rate" yaml:"fail_rate"`
	// OutputBytes overrides Config.OutputBytes for the model's
	// predictions (default 0: Config.OutputBytes).
	OutputBytes int64 `json:"output_bytes" yaml:"output_bytes"`
	// NeverFinish is the share of predictions that stay "processing"
	// forever (until canceled or their Cancel-After deadline); default 0.
	// FailRate+NeverFinish must not exceed 1.
	NeverFinish float64 `json:"never_finish" yaml:"never_finish"`
}

// Faults are the failures the sim injects. Every rate is a probability in
// [0,1]; the zero value injects nothing. Fault durations are real time (not
// divided by Config.TimeScale), as a client sees them.
type Faults struct {
	// RateLimitRate is the probability that a /v1 call outside a throttle
	// episode starts one: it is answered 429 and the whole account stays
	// throttled for RetryAfter. Default 0.
	RateLimitRate float64 `json:"rate_limit_rate" yaml:"rate_limit_rate"`
	// RetryAfter is how long a throttle episode lasts. The Retry-After
	// header gives the time left in whole seconds, rounded up, at least 1.
	// Default DefaultRetryAfter.
	RetryAfter Duration `json:"retry_after" yaml:"retry_after"`
	// RetryAfterGrace: calls arriving within this long after the episode's
	// first 429 was answered are throttled but not counted in
	// Stats.CallsBeforeRetryAfter (a fleet needs that long to hear of a
	// pause). Default DefaultRetryAfterGrace.
	RetryAfterGrace Duration `json:"retry_after_grace" yaml:"retry_after_grace"`
	// ServerErrorRate is the probability that a /v1 call is answered 500,
	// 502 or 503 and has no effect. Default 0.
	ServerErrorRate float64 `json:"server_error_rate" yaml:"server_error_rate"`
	// LostRate is the share of predictions that vanish at a random moment
	// before their natural end: from then on GET and cancel answer 404 and
	// no webhook is sent. Default 0.
	LostRate float64 `json:"lost_rate" yaml:"lost_rate"`
	// WebhookMissingRate is the share of "completed" webhooks never sent.
	// Default 0.
	WebhookMissingRate float64 `json:"webhook_missing_rate" yaml:"webhook_missing_rate"`
	// WebhookDuplicateRate is the share of "completed" webhooks delivered
	// twice (same webhook-id and body). Default 0.
	WebhookDuplicateRate float64 `json:"webhook_duplicate_rate" yaml:"webhook_duplicate_rate"`
	// WebhookLateRate is the share of "completed" webhooks delayed by
	// WebhookLateBy. Default 0.
	WebhookLateRate float64 `json:"webhook_late_rate" yaml:"webhook_late_rate"`
	// WebhookLateBy is the delay of a late webhook. Default
	// DefaultWebhookLateBy.
	WebhookLateBy Duration `json:"webhook_late_by" yaml:"webhook_late_by"`
	// NotIdempotent makes a repeated Idempotency-Key create a new
	// prediction. Default false: the existing prediction is returned.
	NotIdempotent bool `json:"not_idempotent" yaml:"not_idempotent"`

	// The faults below answer status calls (GET a prediction) only.

	// HangRate is the probability that a status call hangs for HangFor
	// (or until the client gives up) and is then answered 503. Default 0.
	HangRate float64 `json:"hang_rate" yaml:"hang_rate"`
	// HangFor is how long a hanging call hangs. Default DefaultHangFor.
	HangFor Duration `json:"hang_for" yaml:"hang_for"`
	// MalformedRate is the probability that a status call is answered 200
	// with a truncated JSON body. Default 0.
	MalformedRate float64 `json:"malformed_rate" yaml:"malformed_rate"`
	// FlapNotFoundRate is the probability that a status call for a live
	// prediction is answered 404 (a provider's inconsistent read). Default
	// 0.
	FlapNotFoundRate float64 `json:"flap_not_found_rate" yaml:"flap_not_found_rate"`
	// OutputGoneRate is the share of succeeded predictions whose output
	// file (Config.OutputBytes) is deleted: GET answers 404, as a
	// provider answers once it has removed an output. Default 0.
	OutputGoneRate float64 `json:"output_gone_rate" yaml:"output_gone_rate"`
	// RegressRate is the probability that a status call shows the
	// prediction as it was earlier (processing after succeeded, starting
	// after processing). Default 0.
	RegressRate float64 `json:"regress_rate" yaml:"regress_rate"`
}

// Limits are the account's own limits: what the provider enforces on the
// token whatever the client does, as opposed to Faults, which strike at
// random. A client that respects them is never refused; one that does not
// is answered 429 without Retry-After, as providers answer a concurrency
// cap, so that tests can see whether a client keeps within limits it is
// not told. They apply with or without Config.Token (the sim has one
// account), are real time like Faults, and are independent of throttle
// episodes. The zero value limits nothing.
type Limits struct {
	// Running is the most predictions that may be non-terminal ("starting"
	// or "processing", not lost) at once. A create that would make one more
	// is answered 429 {"title":"Concurrency limit reached",...} without
	// Retry-After and makes nothing; an Idempotency-Key create that returns
	// an existing prediction is not refused. Default 0: no limit.
	Running int `json:"running" yaml:"running"`
	// Rate is the most /v1 calls per second the account may make, as a
	// token bucket holding max(1, ceil(Rate)) calls (the burst) that
	// refills at Rate per second. Every /v1 call that passes authentication
	// and is not answered by a throttle episode takes a token; a call that
	// finds none is answered 429 {"title":"Too Many Requests",...} without
	// Retry-After and has no effect. Default 0: no limit.
	Rate float64 `json:"rate" yaml:"rate"`
}

// Config configures a Server. The zero value is a valid configuration.
type Config struct {
	// Models holds per-model behaviour by model name ("owner/name") or
	// version id. Default empty: every model uses Default.
	Models map[string]Model `json:"models" yaml:"models"`
	// Default is the behaviour of models not in Models.
	Default Model `json:"default" yaml:"default"`
	// TimeScale divides every Model duration: 20 makes a 60 s run take
	// 3 s of real time. Timestamps, logs and metrics the sim reports are in
	// real time. Default 1.
	TimeScale float64 `json:"time_scale" yaml:"time_scale"`
	// Seed makes durations, outcomes and faults reproducible: prediction n
	// (in creation order) gets the same fate for the same seed. Default 0:
	// seeded from the clock (Stats.Seed reports the seed used).
	Seed int64 `json:"seed" yaml:"seed"`
	// Faults are the injected failures. Default none.
	Faults Faults `json:"faults" yaml:"faults"`
	// Limits are the account's concurrency and rate limits, which the sim
	// enforces on every client of Token. Default none.
	Limits Limits `json:"limits" yaml:"limits"`
	// WebhookSecret signs webhooks: "whsec_" + standard base64 of 24..64
	// bytes. Default: a random 32-byte secret.
	WebhookSecret string `json:"webhook_secret" yaml:"webhook_secret"`
	// Token, when set, must be sent by every /v1 call as
	// "Authorization: Bearer <token>" (401 otherwise). /_sim/* needs none.
	// Default "": no authentication.
	Token string `json:"token" yaml:"token"`
	// Latency is service time added to every /v1 call, so that concurrency
	// can be observed. Default 0.
	Latency Duration `json:"latency" yaml:"latency"`
	// CreateDelay holds a create's answer back this long after the
	// prediction is made: its webhooks may arrive before the answer, and a
	// client that gives up first never learns the id of a prediction that
	// exists. Default 0.
	CreateDelay Duration `json:"create_delay" yaml:"create_delay"`
	// OutputBytes, when positive, makes a succeeded prediction's output
	// a file the sim serves itself, <BaseURL>/files/<id>/output.mp4:
	// that many deterministic bytes (video/mp4), answered 404 once deleted
	// (Faults.OutputGoneRate, DeleteOutput). Default 0: the output URL is
	// on Replicate's delivery host and serves nothing.
	OutputBytes int64 `json:"output_bytes" yaml:"output_bytes"`
	// FetchInputs makes the sim take the files a create's input names, as
	// a provider does: each http(s) URL fetched, each data: URI decoded,
	// its SHA-256 recorded (InputFiles); a URL that cannot be fetched
	// refuses the create with 422. Default false: inputs are not looked
	// at.
	FetchInputs bool `json:"fetch_inputs" yaml:"fetch_inputs"`
	// BaseURL is how the server writes its own URLs (urls.get, urls.cancel),
	// e.g. "http://127.0.0.1:8080". Default "": taken from each create
	// request's Host.
	BaseURL string `json:"base_url" yaml:"base_url"`
	// HTTPClient sends webhooks. Default: a client of its own with a
	// DefaultWebhookTimeout timeout that does not follow redirects.
	HTTPClient *http.Client `json:"-" yaml:"-"`
	// Logger receives debug logs of webhook deliveries. Default: none.
	Logger zerolog.Logger `json:"-" yaml:"-"`
	// Now is the clock for timestamps and status. Default time.Now. Run's
	// timers use real time; they re-read Now at least every second.
	Now func() time.Time `json:"-" yaml:"-"`
}

// withDefaults returns a copy of c with zero fields set to their defaults.
// It does not generate the secret or the seed (New does).
func (c Config) withDefaults() Config {
	c.Default = c.Default.withDefaults()
	if c.Models != nil {
		models := make(map[string]Model, len(c.Models))
		for name, m := range c.Models {
			models[name] = m.withDefaults()
		}
		c.Models = models
	}
	c.TimeScale = cmp.Or(c.TimeScale, 1)
	c.Faults.RetryAfter = cmp.Or(c.Faults.RetryAfter, Duration(DefaultRetryAfter))
	c.Faults.RetryAfterGrace = cmp.Or(c.Faults.RetryAfterGrace, Duration(DefaultRetryAfterGrace))
	c.Faults.WebhookLateBy = cmp.Or(c.Faults.WebhookLateBy, Duration(DefaultWebhookLateBy))
	c.Faults.HangFor = cmp.Or(c.Faults.HangFor, Duration(DefaultHangFor))
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// burst is the most calls Limits.Rate's bucket holds: max(1, ceil(Rate)).
func (l Limits) burst() float64 { return max(1, math.Ceil(l.Rate)) }

func (m Model) withDefaults() Model {
	m.QueueMedian = cmp.Or(m.QueueMedian, Duration(DefaultQueueMedian))
	m.RunMedian = cmp.Or(m.RunMedian, Duration(DefaultRunMedian))
	return m
}

// validate checks a defaulted config and names the first bad field.
func (c Config) validate() error {
	if err := c.Default.validate("default"); err != nil {
		return err
	}
	names := make([]string, 0, len(c.Models))
	for name := range c.Models {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.TrimSpace(name) == "" {
			return errors.New("models: empty model name")
		}
		if err := c.Models[name].validate(fmt.Sprintf("models[%q]", name)); err != nil {
			return err
		}
	}
	if c.OutputBytes < 0 {
		return fmt.Errorf("output_bytes: %d must be >= 0", c.OutputBytes)
	}
	if !(c.TimeScale > 0) || math.IsInf(c.TimeScale, 0) {
		return fmt.Errorf("time_scale: %v must be a finite number > 0", c.TimeScale)
	}
	f := c.Faults
	for _, r := range []struct {
		name string
		v    float64
	}{
		{"faults.rate_limit_rate", f.RateLimitRate},
		{"faults.server_error_rate", f.ServerErrorRate},
		{"faults.lost_rate", f.LostRate},
		{"faults.webhook_missing_rate", f.WebhookMissingRate},
		{"faults.webhook_duplicate_rate", f.WebhookDuplicateRate},
		{"faults.webhook_late_rate", f.WebhookLateRate},
		{"faults.hang_rate", f.HangRate},
		{"faults.output_gone_rate", f.OutputGoneRate},
		{"faults.malformed_rate", f.MalformedRate},
		{"faults.flap_not_found_rate", f.FlapNotFoundRate},
		{"faults.regress_rate", f.RegressRate},
	} {
		if err := checkRate(r.name, r.v); err != nil {
			return err
		}
	}
	for _, d := range []struct {
		name string
		v    Duration
	}{
		{"faults.retry_after", f.RetryAfter},
		{"faults.retry_after_grace", f.RetryAfterGrace},
		{"faults.webhook_late_by", f.WebhookLateBy},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%s: %v must be > 0", d.name, d.v)
		}
	}
	if c.Limits.Running < 0 {
		return fmt.Errorf("limits.running: %d must be >= 0", c.Limits.Running)
	}
	if !(c.Limits.Rate >= 0) || math.IsInf(c.Limits.Rate, 0) {
		return fmt.Errorf("limits.rate: %v must be a finite number >= 0", c.Limits.Rate)
	}
	if c.Latency < 0 {
		return fmt.Errorf("latency: %v must be >= 0", c.Latency)
	}
	if c.CreateDelay < 0 {
		return fmt.Errorf("create_delay: %v must be >= 0", c.CreateDelay)
	}
	if c.WebhookSecret != "" {
		if _, err := decodeSecret(c.WebhookSecret); err != nil {
			return fmt.Errorf("webhook_secret: %w", err)
		}
	}
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("base_url: %q is not an absolute http(s) URL", c.BaseURL)
		}
	}
	return nil
}

func (m Model) validate(field string) error {
	if m.QueueMedian <= 0 {
		return fmt.Errorf("%s.queue_median: %v must be > 0", field, m.QueueMedian)
	}
	if m.RunMedian <= 0 {
		return fmt.Errorf("%s.run_median: %v must be > 0", field, m.RunMedian)
	}
	if m.OutputBytes < 0 {
		return fmt.Errorf("%s.output_bytes: %d must be >= 0", field, m.OutputBytes)
	}
	if !(m.QueueSigma >= 0) || math.IsInf(m.QueueSigma, 0) {
		return fmt.Errorf("%s.queue_sigma: %v must be a finite number >= 0", field, m.QueueSigma)
	}
	if !(m.RunSigma >= 0) || math.IsInf(m.RunSigma, 0) {
		return fmt.Errorf("%s.run_sigma: %v must be a finite number >= 0", field, m.RunSigma)
	}
	if err := checkRate(field+".fail_rate", m.FailRate); err != nil {
		return err
	}
	if err := checkRate(field+".never_finish", m.NeverFinish); err != nil {
		return err
	}
	if m.FailRate+m.NeverFinish > 1 {
		return fmt.Errorf("%s.fail_rate + %s.never_finish: %v must not exceed 1", field, field, m.FailRate+m.NeverFinish)
	}
	return nil
}

func checkRate(name string, v float64) error {
	if !(v >= 0 && v <= 1) {
		return fmt.Errorf("%s: %v is not in [0,1]", name, v)
	}
	return nil
}

const secretPrefix = "whsec_"

// decodeSecret returns the key bytes of a "whsec_" secret.
func decodeSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return nil, fmt.Errorf("must start with %q", secretPrefix)
	}
	key, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil {
		return nil, errors.New("the part after \"whsec_\" is not standard base64")
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("key is %d bytes; want 24..64", len(key))
	}
	return key, nil
}

// newSecret returns a random "whsec_" secret of 32 bytes.
func newSecret() string {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails
	return secretPrefix + base64.StdEncoding.EncodeToString(key)
}

// LoadConfig reads a Config from a YAML or JSON file (JSON when the name
// ends in ".json"). Decoding is strict: unknown fields are errors. The
// result is validated as New would validate it.
func LoadConfig(path string) (Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("sim: load config: %w", err)
	}
	var cfg Config
	if strings.EqualFold(filepath.Ext(path), ".json") {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return Config{}, fmt.Errorf("sim: load config %s: %w", path, err)
		}
		var extra json.RawMessage
		if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
			return Config{}, fmt.Errorf("sim: load config %s: data after the JSON object", path)
		}
	} else {
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		dec.KnownFields(true)
		if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
			return Config{}, fmt.Errorf("sim: load config %s: %w", path, err)
		}
		var extra any
		if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
			return Config{}, fmt.Errorf("sim: load config %s: more than one YAML document", path)
		}
	}
	if err := cfg.withDefaults().validate(); err != nil {
		return Config{}, fmt.Errorf("sim: load config %s: %w", path, err)
	}
	return cfg, nil
}
