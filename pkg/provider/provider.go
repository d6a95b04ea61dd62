package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/pkg/signature"
	"github.com/pollux-dev/pollux/pkg/state"
)

// SubmitRequest is one job to submit.
type SubmitRequest struct {
	// JobID is Pollux's id for the job.
	JobID string
	// Model is the provider's model identifier.
	Model string
	// Input is the provider input (a JSON object).
	Input json.RawMessage
	// IdempotencyKey is stable across retries of the same job; adapters
	// send it where the provider accepts one.
	IdempotencyKey string
	// Deadline, when set, is mapped to the provider's own deadline where it
	// has one, so the provider stops work Pollux will no longer wait for.
	Deadline time.Time
	// WebhookURL asks the provider to notify this URL; empty for none.
	// Pollux's is per job (it names the job), so a provider that shows it
	// back can be asked for the job by it (Finder).
	WebhookURL string
	// AttemptedAt and AttemptEnded, set for Finder.Find, bound when the
	// call in doubt was made: a job it created was created in between, by
	// Pollux's clock.
	AttemptedAt, AttemptEnded time.Time
}

// Status is a normalized provider answer about one job.
type Status struct {
	state.Observation
	// RemoteID is the provider's id for the job.
	RemoteID string
	// RefData, set by Submit, is what the adapter needs kept with the job
	// to reach it again (fal's status and cancel URLs, say); Pollux stores
	// it with the job and passes it back in every Ref. At most MaxRefData
	// bytes of JSON.
	RefData json.RawMessage
	// PollAfter is the provider's hint for the next poll (a poll-after
	// or Retry-After header on a successful answer); the schedule takes it
	// as a floor, within the route's max_delay.
	PollAfter time.Duration
	// ETA is the provider's estimate of the time the job has left, at the
	// answer; 0 when it gives none. The schedule places the next poll
	// around it.
	ETA time.Duration
}

// MaxRefData bounds Status.RefData.
const MaxRefData = 4 << 10

// Ref identifies a job at its provider.
type Ref struct {
	// ID is the provider's id for the job.
	ID string
	// Model is the job's model identifier.
	Model string
	// Data is the RefData Submit returned; nil for a job submitted
	// elsewhere and tracked, so adapters must work without it.
	Data json.RawMessage
}

// JobRef is how a job's adapter reaches it.
func JobRef(j *state.Job) Ref {
	return Ref{ID: j.RemoteID, Model: j.Model, Data: j.ProviderRef}
}

// Info describes what an adapter's provider can do.
type Info struct {
	// Kind is the adapter kind (replicate, sim, ...).
	Kind string
	// Cancel is true when the provider can cancel jobs.
	Cancel bool
	// Webhooks is true when the provider notifies completion by signed
	// webhook (see Webhooks).
	Webhooks bool
	// Callbacks is true when the provider can notify a job's changes by an
	// unsigned callback (see Callbacks).
	Callbacks bool
	// WebhooksByRemoteID is true when the provider's webhook endpoint is
	// set once for the account (OpenAI's project webhooks), not per job:
	// a delivery's URL names no job, only its body the remote one, so
	// Pollux keeps an index from remote ids to jobs to route it.
	WebhooksByRemoteID bool
	// Idempotent is true when submitting the same idempotency key twice
	// returns the same remote job: only then may a submission whose outcome
	// is in doubt be retried.
	Idempotent bool
	// PollFloor is the shortest useful interval between status calls.
	PollFloor time.Duration
}

// Adapter talks to one provider account.
type Adapter interface {
	// Info describes the provider.
	Info() Info
	// Submit creates the job and returns its first status with RemoteID.
	Submit(ctx context.Context, req SubmitRequest) (Status, error)
	// Status fetches the job's status.
	Status(ctx context.Context, ref Ref) (Status, error)
	// Cancel asks the provider to cancel the job and returns the status it
	// answers with; ErrUnsupported when it cannot.
	Cancel(ctx context.Context, ref Ref) (Status, error)
}

// Finder is implemented by adapters whose provider can look a job up by
// something Pollux sent when it created it and that names that one job (a
// client-side id, metadata, the per-job webhook URL) — never by the input
// alone, which two jobs may share. Pollux asks it before it gives up a
// submission whose create call got no answer: found, the job is followed;
// not found, it is submitted again; ErrCannotTell, it is lost. An adapter
// whose provider cannot be asked does not implement it (see
// docs/providers.md for which can).
type Finder interface {
	// Find looks for the job req created, among the jobs created between
	// req.AttemptedAt and req.AttemptEnded (give or take the clocks'
	// skew). found false must mean the provider has no job from req:
	// Pollux asks only once the interrupted call's timeout has passed, and
	// then submits again. When the answer cannot say — more than one job
	// matches, more jobs in the window than the lookup reads, nothing sent
	// with req that the provider shows back — it returns an error wrapping
	// ErrCannotTell, and the job is lost. Other errors are classified as
	// any call's, and the lookup is retried.
	Find(ctx context.Context, req SubmitRequest) (st Status, found bool, err error)
}

// Webhooks is implemented by adapters whose provider sends webhooks.
type Webhooks interface {
	// VerifyWebhook authenticates a delivery before anything parses it and
	// returns the provider's delivery id (the deduplication key). It
	// returns an error wrapping ErrSignature for a delivery that is not
	// authentic or is stale, and ErrMalformed for one that cannot be read.
	VerifyWebhook(ctx context.Context, h http.Header, body []byte) (deliveryID string, err error)
	// ParseWebhook decodes a verified delivery into a status.
	ParseWebhook(h http.Header, body []byte) (Status, error)
}

// Callbacks is implemented by adapters whose provider notifies a job's
// changes by an unsigned callback to a URL given at submit (Luma, Kling,
// MiniMax, Seedance). Anyone can send one, so Pollux takes it only as a
// hint that the job may have changed, and asks the provider with a status
// call before anything changes.
type Callbacks interface {
	// CallbackRemoteID reads which remote job a callback is about; an
	// error wrapping ErrMalformed when it cannot tell.
	CallbackRemoteID(body []byte) (string, error)
}

// Errors of webhook verification and of unsupported operations.
var (
	ErrSignature   = errors.New("webhook signature invalid")
	ErrMalformed   = errors.New("webhook malformed")
	ErrUnsupported = errors.New("not supported by this provider")
	// ErrCannotTell is Finder.Find's answer when the provider's answer
	// cannot tell whether it has the job.
	ErrCannotTell = errors.New("the provider cannot tell whether it has the job")
)

// VerifyError is what Webhooks.Verify returns for a signature verifier's
// refusal: a delivery that cannot be read (a header missing or malformed:
// signature.Malformed) wraps ErrMalformed, any other ErrSignature.
func VerifyError(err error) error {
	if signature.Malformed(err) {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return fmt.Errorf("%w: %w", ErrSignature, err)
}

// Config configures one route's adapter. Token and WebhookSecret are
// secrets: adapters never log them.
type Config struct {
	// Route is the route's name.
	Route string
	// Kind selects the adapter.
	Kind string
	// BaseURL is the provider's API base URL (the adapter's default when
	// empty).
	BaseURL string
	// Token is the API credential.
	Token string
	// WebhookSecret verifies webhook deliveries.
	WebhookSecret string
	// Options are the kind-specific settings, as JSON.
	Options json.RawMessage
	// HTTPClient makes the calls (default: a client with a 30 s timeout).
	HTTPClient *http.Client
	// Logger receives the adapter's log lines.
	Logger zerolog.Logger
}

// Factory builds an adapter.
type Factory func(Config) (Adapter, error)

// Registry maps adapter kinds to their factories.
type Registry map[string]Factory

// New builds the adapter of cfg.Kind.
func (r Registry) New(cfg Config) (Adapter, error) {
	f, ok := r[cfg.Kind]
	if !ok {
		return nil, fmt.Errorf("route %s: unknown provider kind %q (known: %v)", cfg.Route, cfg.Kind, r.Kinds())
	}
	a, err := f(cfg)
	if err != nil {
		return nil, fmt.Errorf("route %s (%s): %w", cfg.Route, cfg.Kind, err)
	}
	return a, nil
}

// Kinds lists the registered kinds in order.
func (r Registry) Kinds() []string {
	k := make([]string, 0, len(r))
	for kind := range r {
		k = append(k, kind)
	}
	sort.Strings(k)
	return k
}
