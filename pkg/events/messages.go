package events

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// Version is the contract version every message carries in "v".
const Version = 1

// Limits on message contents.
const (
	// MaxCheckBytes is the largest check message (the checks stream's
	// message size limit).
	MaxCheckBytes = 4 << 10
	// MaxMessageBytes is the largest intake message accepted.
	MaxMessageBytes = 256 << 10
	// MaxIDLen is the longest job id (a token, see ValidToken).
	MaxIDLen = MaxTokenLen
	// MaxKeyLen is the longest idempotency key or remote id.
	MaxKeyLen = 256
	// MaxModelLen is the longest model name.
	MaxModelLen = 256
	// MaxMetadata is the most metadata entries, MaxMetadataKey and
	// MaxMetadataValue their sizes.
	MaxMetadata      = 32
	MaxMetadataKey   = 64
	MaxMetadataValue = 1024
	// MaxExpected is the longest expected duration or timeout accepted.
	MaxExpected = 7 * 24 * time.Hour
	// MaxReasonLen is the longest cancel or submission reason.
	MaxReasonLen = 1024
	// MaxByLen is the longest "by" (who asked) of a message.
	MaxByLen = 256
	// MaxAppLen is the longest app name (see ValidApp).
	MaxAppLen = 64
)

// FieldError is a validation failure that names the offending field ("" for
// the message as a whole).
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return e.Field + ": " + e.Problem
}

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Submit asks Pollux to submit a job to a route's provider and track it.
type Submit struct {
	// V is the contract version (1).
	V int `json:"v"`
	// ID is the job id; optional. Without it, the id is derived from the
	// idempotency key, and without that from the intake message itself.
	ID string `json:"id,omitempty"`
	// IdempotencyKey makes resubmissions safe: the same key on the same
	// route is the same job, however far apart the submissions are.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Model is the provider's model identifier.
	Model string `json:"model"`
	// Input is the provider input, a JSON object passed through as is.
	Input json.RawMessage `json:"input"`
	// Deadline is when Pollux gives up and expires the job (RFC 3339).
	Deadline time.Time `json:"deadline,omitzero"`
	// TimeoutS sets the deadline relative to acceptance, in seconds; at
	// most one of Deadline and TimeoutS.
	TimeoutS float64 `json:"timeout_s,omitempty"`
	// ExpectedDurationS is the submitter's estimate of the run time, in
	// seconds, used until Pollux has learned the model.
	ExpectedDurationS float64 `json:"expected_duration_s,omitempty"`
	// Webhook asks for (true) or declines (false) a provider webhook; the
	// route's setting when absent.
	Webhook *bool `json:"webhook,omitempty"`
	// ConfigKey refines the model for learned durations (e.g. "1080p-10s").
	ConfigKey string `json:"config_key,omitempty"`
	// Metadata is returned in every event of the job.
	Metadata map[string]string `json:"metadata,omitempty"`
	// NotifyURL is an endpoint of the submitter's own that Pollux calls
	// with the job's events (signed, retried; see package notify), where
	// the deployment accepts submissions' URLs (notify.submissions).
	NotifyURL string `json:"notify_url,omitempty"`
	// HedgeOf names the job, submitted to a model route, this submission
	// hedges on another of its members: the first to succeed ends the
	// hedged job, and the other is canceled. Pollux's pollers send these;
	// see route.ModelRoute.
	HedgeOf string `json:"hedge_of,omitempty"`
	// ResubmitOf names the finished job (failed, lost or expired) this
	// submission resubmits: once the new job is accepted, the old record
	// lists it in resubmitted_as. The front door's resubmit sends these.
	ResubmitOf string `json:"resubmit_of,omitempty"`
	// By is who asked for the job (a front door token's name, "console",
	// "api"), and Reason why, for the record.
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
	// App is the application the job belongs to (ValidApp; "" for none):
	// the app of the front door token that created it, or what a
	// publisher over NATS names. Only the app's tokens see the job, the
	// app is its fair-share tenant unless the route names a tenant_key,
	// and its spend counts against the app's budgets.
	App string `json:"app,omitempty"`
}

// Track asks Pollux to track a job that was submitted elsewhere.
type Track struct {
	V                 int               `json:"v"`
	ID                string            `json:"id,omitempty"`
	RemoteID          string            `json:"remote_id"`
	Model             string            `json:"model"`
	Deadline          time.Time         `json:"deadline,omitzero"`
	TimeoutS          float64           `json:"timeout_s,omitempty"`
	ExpectedDurationS float64           `json:"expected_duration_s,omitempty"`
	Webhook           *bool             `json:"webhook,omitempty"`
	ConfigKey         string            `json:"config_key,omitempty"`
	Metadata          map[string]string `json:"metadata,omitempty"`
	// App is the application the job belongs to, as Submit.App.
	App string `json:"app,omitempty"`
}

// Cancel asks Pollux to cancel a job.
type Cancel struct {
	V      int    `json:"v"`
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
	// By is who asks (as Submit.By), for the record.
	By string `json:"by,omitempty"`
}

// DecodeSubmit parses and validates a submission.
func DecodeSubmit(data []byte) (*Submit, error) {
	var m Submit
	if err := decode(data, &m); err != nil {
		return nil, err
	}
	if err := checkVersion(m.V); err != nil {
		return nil, err
	}
	if err := checkOptionalID(m.ID); err != nil {
		return nil, err
	}
	if err := checkText("idempotency_key", m.IdempotencyKey, MaxKeyLen, false); err != nil {
		return nil, err
	}
	if err := checkText("model", m.Model, MaxModelLen, true); err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(m.Input)) == 0 || bytes.Equal(bytes.TrimSpace(m.Input), []byte("null")) {
		return nil, fieldErr("input", "required (a JSON object)")
	}
	if m.Input[0] != '{' {
		return nil, fieldErr("input", "must be a JSON object")
	}
	if err := checkTiming(m.Deadline, m.TimeoutS, m.ExpectedDurationS); err != nil {
		return nil, err
	}
	if err := checkCommon(m.ConfigKey, m.Metadata); err != nil {
		return nil, err
	}
	if m.NotifyURL != "" {
		if err := checkNotifyURL(m.NotifyURL); err != nil {
			return nil, fieldErr("notify_url", "%s", err)
		}
	}
	if m.HedgeOf != "" && !ValidToken(m.HedgeOf) {
		return nil, fieldErr("hedge_of", "a job id is 1-128 characters of [A-Za-z0-9_-]")
	}
	if m.ResubmitOf != "" && !ValidToken(m.ResubmitOf) {
		return nil, fieldErr("resubmit_of", "a job id is 1-128 characters of [A-Za-z0-9_-]")
	}
	if err := checkText("by", m.By, MaxByLen, false); err != nil {
		return nil, err
	}
	if err := checkText("reason", m.Reason, MaxReasonLen, false); err != nil {
		return nil, err
	}
	if err := checkApp(m.App); err != nil {
		return nil, err
	}
	return &m, nil
}

// DecodeTrack parses and validates a track request.
func DecodeTrack(data []byte) (*Track, error) {
	var m Track
	if err := decode(data, &m); err != nil {
		return nil, err
	}
	if err := checkVersion(m.V); err != nil {
		return nil, err
	}
	if err := checkOptionalID(m.ID); err != nil {
		return nil, err
	}
	if err := checkText("remote_id", m.RemoteID, MaxKeyLen, true); err != nil {
		return nil, err
	}
	if strings.ContainsAny(m.RemoteID, "/?#% ") {
		return nil, fieldErr("remote_id", "must not contain '/', '?', '#', '%%' or spaces")
	}
	if err := checkText("model", m.Model, MaxModelLen, true); err != nil {
		return nil, err
	}
	if err := checkTiming(m.Deadline, m.TimeoutS, m.ExpectedDurationS); err != nil {
		return nil, err
	}
	if err := checkCommon(m.ConfigKey, m.Metadata); err != nil {
		return nil, err
	}
	if err := checkApp(m.App); err != nil {
		return nil, err
	}
	return &m, nil
}

// DecodeCancel parses and validates a cancel request.
func DecodeCancel(data []byte) (*Cancel, error) {
	var m Cancel
	if err := decode(data, &m); err != nil {
		return nil, err
	}
	if err := checkVersion(m.V); err != nil {
		return nil, err
	}
	if m.ID == "" {
		return nil, fieldErr("id", "required")
	}
	if err := checkOptionalID(m.ID); err != nil {
		return nil, err
	}
	if err := checkText("reason", m.Reason, MaxReasonLen, false); err != nil {
		return nil, err
	}
	if err := checkText("by", m.By, MaxByLen, false); err != nil {
		return nil, err
	}
	return &m, nil
}

func decode(data []byte, v any) error {
	if len(data) > MaxMessageBytes {
		return fieldErr("", "message is %d bytes, larger than the %d allowed", len(data), MaxMessageBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return fieldErr("", "empty message (expected a JSON object)")
	}
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fieldErr(te.Field, "must be a JSON %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)
		}
		var pe *time.ParseError
		if errors.As(err, &pe) {
			return fieldErr("deadline", "must be an RFC 3339 time such as 2026-11-29T15:04:05Z")
		}
		return fieldErr("", "not a JSON object: %v", err)
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "int", "int64", "uint64", "float64":
		return "number"
	case "bool":
		return "boolean"
	case "map", "struct":
		return "object"
	case "slice":
		return "array"
	}
	return goKind
}

func checkVersion(v int) error {
	switch v {
	case Version:
		return nil
	case 0:
		return fieldErr("v", "required (this Pollux speaks version %d)", Version)
	}
	return fieldErr("v", "unsupported version %d (this Pollux speaks version %d)", v, Version)
}

// ValidApp reports whether s is an app's name: 1 to MaxAppLen characters
// of [A-Za-z0-9_-], so that it can be a subject token (a fair-share
// tenant, a NATS permission) as it is.
func ValidApp(s string) bool { return len(s) <= MaxAppLen && ValidToken(s) }

func checkApp(app string) error {
	if app != "" && !ValidApp(app) {
		return fieldErr("app", "an app is 1 to %d characters of [A-Za-z0-9_-]", MaxAppLen)
	}
	return nil
}

func checkOptionalID(id string) error {
	if id != "" && !ValidToken(id) {
		return fieldErr("id", "%s", tokenProblem(id))
	}
	return nil
}

func checkText(field, s string, max int, required bool) error {
	switch {
	case s == "" && required:
		return fieldErr(field, "required")
	case len(s) > max:
		return fieldErr(field, "%d bytes, longer than %d", len(s), max)
	case !utf8.ValidString(s):
		return fieldErr(field, "not valid UTF-8")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fieldErr(field, "contains control characters")
		}
	}
	return nil
}

func checkTiming(deadline time.Time, timeoutS, expectedS float64) error {
	switch {
	case !deadline.IsZero() && timeoutS != 0:
		return fieldErr("timeout_s", "give deadline or timeout_s, not both")
	case timeoutS < 0 || timeoutS > MaxExpected.Seconds():
		return fieldErr("timeout_s", "must be between 0 and %.0f seconds", MaxExpected.Seconds())
	case expectedS < 0 || expectedS > MaxExpected.Seconds():
		return fieldErr("expected_duration_s", "must be between 0 and %.0f seconds", MaxExpected.Seconds())
	}
	return nil
}

func checkCommon(configKey string, md map[string]string) error {
	if configKey != "" && (!ValidToken(configKey) || len(configKey) > 64) {
		return fieldErr("config_key", "must be 1-64 characters of [A-Za-z0-9_-]")
	}
	if len(md) > MaxMetadata {
		return fieldErr("metadata", "%d entries, more than %d", len(md), MaxMetadata)
	}
	for k, v := range md {
		if err := checkText("metadata key", k, MaxMetadataKey, true); err != nil {
			return err
		}
		if err := checkText("metadata."+k, v, MaxMetadataValue, false); err != nil {
			return err
		}
	}
	return nil
}

// ResolveDeadline returns the absolute deadline of a request accepted at
// now: the explicit deadline, else now+timeout, else zero.
func ResolveDeadline(deadline time.Time, timeoutS float64, now time.Time) time.Time {
	if !deadline.IsZero() {
		return deadline.UTC()
	}
	if timeoutS > 0 {
		return now.Add(time.Duration(timeoutS * float64(time.Second))).UTC()
	}
	return time.Time{}
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// KeyID derives a job id from an idempotency key: the same key on the same
// route always gives the same id, and different routes give different ids.
func KeyID(route, key string) string {
	h := sha256.New()
	h.Write([]byte(route))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return "k-" + idEncoding.EncodeToString(h.Sum(nil))[:26]
}

// RemoteKeyID derives the id of a tracked job that names no id from its
// provider's id: tracking the same remote job twice on a route is one job.
func RemoteKeyID(route, remoteID string) string { return KeyID(route, "remote:"+remoteID) }

// AppKeyID is KeyID for a submission of app: the same key used by two
// apps is two jobs (one app's key never lands on another's job, nor tells
// it that job exists). For no app it is KeyID.
func AppKeyID(route, app, key string) string {
	if app == "" {
		return KeyID(route, key)
	}
	return KeyID(route, "app:"+app+"\x00"+key)
}

// AppRemoteKeyID is RemoteKeyID for a track request of app, as AppKeyID.
func AppRemoteKeyID(route, app, remoteID string) string {
	return AppKeyID(route, app, "remote:"+remoteID)
}

// MessageID derives a job id for a submission that has neither id nor
// idempotency key from its intake message: redeliveries of the same stored
// message give the same id, and a recreated stream does not reuse ids.
func MessageID(streamSeq uint64, stored time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], streamSeq)
	binary.BigEndian.PutUint64(b[8:], uint64(stored.UnixNano()))
	sum := sha256.Sum256(b[:])
	return "m-" + idEncoding.EncodeToString(sum[:])[:26]
}

// MaxNotifyURLLen is the longest notify_url.
const MaxNotifyURLLen = 2048

// checkNotifyURL checks a submission's notify_url: an absolute http or
// https URL with a host and no credentials. Whether its address may be
// called is decided when it is called.
func checkNotifyURL(raw string) error {
	if len(raw) > MaxNotifyURLLen {
		return fmt.Errorf("%d bytes, longer than %d", len(raw), MaxNotifyURLLen)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("scheme %q: want http or https", u.Scheme)
	case u.Host == "" || strings.HasPrefix(u.Host, ":"):
		return errors.New("no host")
	case u.User != nil:
		return errors.New("credentials in the URL are not accepted")
	}
	return nil
}
