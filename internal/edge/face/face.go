// Package face holds what Pollux's provider faces share. A face answers a
// provider's own wire shape — Replicate's predictions API, fal's queue
// through the fal client's proxy protocol, OpenAI's videos API — so an
// application written against that provider's official SDK works against
// Pollux unchanged but for its base URL, and every instance of it, however
// often its SDK polls, costs the provider nothing beyond Pollux's own
// schedule.
//
// A face is mounted for a route (or model route) by the route's
// configuration (faces: [replicate, fal, openai]) and served by the front
// door at /{kind}/{route}/..., behind the front door's Host check and
// tokens: the SDK's API key is a Pollux token (any of Bearer, Token or
// Key schemes), and the provider's key stays in Pollux. Each face lives in
// a package of its own below this one; this package holds the contract
// between a face and the front door:
//
//   - Pollux is what a face may ask of Pollux: publish a submission, read a
//     record, list the records the face made, wait for a record to
//     change, ask for a cancel, serve an output. A face never calls a provider: a status request is answered
//     from the job's record (kept current by Pollux's polls and webhooks).
//   - Face is what the front door asks of a face: its handler, and how to
//     write an error in the provider's own shape (the front door's own
//     refusals — a bad token, a read-only token acting, an exceeded quota
//     — reach the SDK as the provider's errors).
//   - ID mints the job id of a create: derived from the route and the
//     create's idempotency key when it has one, so a create retried with
//     the same key is one job; random otherwise. Each face formats it as
//     its provider's ids look.
//   - IdempotencyKey and ReadBody read what every create carries — its
//     key, and (for the JSON faces) its body, bounded — each refusal an
//     Error the face writes in its provider's shape.
//
// Package facetest holds an in-memory Pollux for the faces' tests.
package face

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Kind names a face.
type Kind string

// The faces.
const (
	// Replicate is Replicate's predictions API (package face/replicate).
	Replicate Kind = "replicate"
	// Fal is fal's queue API through the fal client's proxy protocol
	// (package face/fal).
	Fal Kind = "fal"
	// OpenAI is OpenAI's videos API (package face/openai).
	OpenAI Kind = "openai"
)

// Kinds lists every face, in the order documentation shows them.
var Kinds = []Kind{Replicate, Fal, OpenAI}

// Valid reports whether k names a face.
func (k Kind) Valid() bool {
	for _, v := range Kinds {
		if k == v {
			return true
		}
	}
	return false
}

// Prefix is the path below which the front door serves face k of route.
func Prefix(k Kind, route string) string { return "/" + string(k) + "/" + route }

// Mount is one face mounted for one route.
type Mount struct {
	// Kind is the face.
	Kind Kind
	// Route is the route or model route its creates are submitted to.
	Route string
	// Prefix is the path the face is served below (Prefix(Kind, Route));
	// its handler sees paths with it stripped.
	Prefix string
	// Logger receives the face's log lines.
	Logger zerolog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// RecordGrace is how long Record waits for a record that does not
	// exist yet (DefaultRecordGrace when zero).
	RecordGrace time.Duration
}

// DefaultRecordGrace is how long a face waits for a job's record that
// does not exist yet before it answers that there is no such job: a
// create is answered once its submission is durable, or once its record
// exists within a bound, and ingest — behind a slow moment, or seen from
// another gateway than the one that answered — may take the submission
// a little after the app asks about it.
const DefaultRecordGrace = 3 * time.Second

// Record reads job id's record, waiting up to the mount's RecordGrace for
// one that does not exist yet; state.ErrNotFound when there is none then.
func (m Mount) Record(ctx context.Context, p Pollux, id string) (*state.Job, error) {
	j, err := p.Job(ctx, id)
	if !errors.Is(err, state.ErrNotFound) {
		return j, err
	}
	return m.AwaitRecord(ctx, p, id)
}

// AwaitRecord is Record's wait alone, for a face that has read the record
// already.
func (m Mount) AwaitRecord(ctx context.Context, p Pollux, id string) (*state.Job, error) {
	grace := m.RecordGrace
	if grace == 0 {
		grace = DefaultRecordGrace
	}
	wctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	return p.Wait(wctx, id, func(*state.Job) bool { return true })
}

// Clock returns the mount's clock.
func (m Mount) Clock() time.Time {
	if m.Now == nil {
		return time.Now()
	}
	return m.Now()
}

// Errors a Pollux returns.
var (
	// ErrTerminal: the job has ended; it cannot be canceled.
	ErrTerminal = errors.New("the job has ended")
	// ErrOutputNotFound: the job has no output of that index.
	ErrOutputNotFound = errors.New("no such output")
	// ErrNoSuchJob: a list was asked for the jobs after one it does not
	// hold.
	ErrNoSuchJob = errors.New("no such job")
)

// MaxList is the most jobs a list answers at once.
const MaxList = 100

// Pollux is what a face asks of Pollux; the front door implements it.
// Each method is answered from Pollux's own state: none calls a provider.
type Pollux interface {
	// Submit publishes submission m (its ID set) on route, as request r's
	// caller; it returns once the message is durable in the intake
	// stream, so the job will be created and is never created twice.
	// A contract violation is an error face.AsError reads as a 400
	// naming the field.
	Submit(ctx context.Context, r *http.Request, route string, m events.Submit) error
	// Job reads job id's record; state.ErrNotFound when there is none
	// (yet: a submission has a record once ingest has taken it).
	Job(ctx context.Context, id string) (*state.Job, error)
	// Wait returns job id's record once done holds for it, or, when ctx
	// ends first, the latest record (state.ErrNotFound when there is
	// none). It watches the jobs index, so a thousand waiters cost the
	// provider nothing.
	Wait(ctx context.Context, id string, done func(*state.Job) bool) (*state.Job, error)
	// Cancel asks for job j's cancel on request r's behalf; ErrTerminal
	// when the job has ended.
	Cancel(ctx context.Context, r *http.Request, j *state.Job, reason string) error
	// List returns the jobs face k made on route, newest first: at most
	// limit (1 to MaxList), those after job after when it is not "", and
	// whether more follow. ErrNoSuchJob when after names no job of the
	// list. Jobs made elsewhere (a submission over NATS, POST /v1/jobs)
	// are not a face's.
	List(ctx context.Context, k Kind, route, after string, limit int) (jobs []*state.Job, more bool, err error)
	// Output writes output n of job j: the bytes output custody kept,
	// else a redirect to the provider's URL; ErrOutputNotFound when the
	// job has no such output. Nothing is written when it returns an
	// error.
	Output(w http.ResponseWriter, r *http.Request, j *state.Job, n int) error
}

// OutputURL is output n of job j as a URL a face may send an app to: an
// http or https URL with a host, else (or when the job has no output n)
// ErrOutputNotFound. The record holds what the provider said, which is
// not to be trusted as a redirect target.
func OutputURL(j *state.Job, n int) (string, error) {
	if n < 0 || n >= len(j.Outputs) {
		return "", ErrOutputNotFound
	}
	u, err := url.Parse(j.Outputs[n])
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", ErrOutputNotFound
	}
	return u.String(), nil
}

// Error is an error a face writes in its provider's shape.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code is Pollux's error code (the front door's, or a face's own).
	Code string
	// Message says what is wrong, for a person.
	Message string
	// Field names the field, header or parameter at fault, if any.
	Field string
	// RetryAfter, when positive, goes into the Retry-After header.
	RetryAfter time.Duration
	// Header is set on the response before it is written.
	Header http.Header
}

// AsError returns the Error a Pollux method's error carries — the front
// door's own refusals (an invalid field, NATS unavailable) — and false for
// any other error. (A face cannot import the front door that mounts it.)
func AsError(err error) (Error, bool) {
	var c interface{ FaceError() Error }
	if errors.As(err, &c) {
		return c.FaceError(), true
	}
	return Error{}, false
}

// Face is what the front door asks of a face.
type Face interface {
	// Handler serves the face's endpoints, below its mount's prefix
	// (stripped).
	Handler() http.Handler
	// WriteError writes e in the provider's own error shape.
	WriteError(w http.ResponseWriter, e Error)
}

// New builds a face of a mount over Pollux.
type New func(m Mount, p Pollux) Face

// IDBytes returns n bytes (at most 32) a face formats as a job id: derived
// from the route and key when key is not empty — the same create retried
// with the same key has the same id, so Pollux makes it one job — and
// random otherwise.
func IDBytes(k Kind, route, key string, n int) []byte {
	if key == "" {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return b
	}
	sum := sha256.Sum256([]byte("pollux face id v1\x00" + string(k) + "\x00" + route + "\x00" + key))
	return sum[:n]
}

// IdempotencyKey is a create's idempotency key: its Idempotency-Key
// header, bounded as the contract bounds a submission's key.
func IdempotencyKey(r *http.Request) (string, *Error) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return "", nil
	}
	if len(key) > events.MaxKeyLen {
		return "", &Error{Status: http.StatusBadRequest, Code: "invalid_parameter", Field: "Idempotency-Key",
			Message: "Idempotency-Key: at most " + strconv.Itoa(events.MaxKeyLen) + " bytes"}
	}
	return key, nil
}

// PollAfter is how long a client should wait before asking about job j
// again: until Pollux's own next check of it (its plan), at least min and
// at most max; 0 once the job has ended.
func PollAfter(j *state.Job, now time.Time, minWait, maxWait time.Duration) time.Duration {
	if j == nil {
		return minWait
	}
	if j.State.Terminal() {
		return 0
	}
	d := j.NextCheckAt.Sub(now)
	return min(max(d, minWait), maxWait)
}
