package face

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/pollux-dev/pollux/internal/core/faceshape"
	"github.com/pollux-dev/pollux/internal/edge/tenant"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Kind names a face.
type Kind string

// The faces.
const (
	// Replicate is Replicate's predictions API (package face/replicate).
	Replicate Kind = faceshape.FaceReplicate
	// Fal is fal's queue API through the fal client's proxy protocol
	// (package face/fal).
	Fal Kind = faceshape.FaceFal
	// OpenAI is OpenAI's videos API (package face/openai), now a routing
	// face: OpenAI removed the API itself on 2026-09-24.
	OpenAI Kind = "openai"
	// GenAI is Google's Veo through the Gemini API and Vertex AI's express
	// mode, as @google/genai speaks them (package face/genai).
	GenAI Kind = "genai"
	// Runway is Runway's tasks API (package face/runway).
	Runway Kind = "runway"
	// Luma is Luma's Dream Machine generations API (package face/luma).
	Luma Kind = "luma"
)

// Kinds lists every face, in the order documentation shows them.
var Kinds = []Kind{Replicate, Fal, OpenAI, GenAI, Runway, Luma}

// sdk is what a face's SDK does that Pollux must answer for, declared
// once per face.
type sdk struct {
	// keyHeader is the header besides Authorization the SDK sends its API
	// key in.
	keyHeader string
	// downloadsWithKey: the SDK sends the app's key (a Pollux token)
	// with the request that downloads an output from the face, in a
	// header that survives a redirect to another origin — a redirect
	// would hand the token to the provider's. @google/genai's
	// files.download sends x-goog-api-key, which fetch (undici) keeps
	// across origins. The openai SDK's downloadContent sends
	// Authorization, which fetch, httpx, requests and Go's net/http all
	// drop across origins: its redirect carries nothing. Replicate's
	// FileOutput, fal, Runway and Luma apps fetch output URLs
	// themselves, with no key.
	downloadsWithKey bool
}

var sdks = map[Kind]sdk{
	GenAI: {keyHeader: "X-Goog-Api-Key", downloadsWithKey: true},
}

// KeyHeader is the header besides Authorization in which face k's SDK
// sends its API key (a Pollux token), "" when it has none: @google/genai
// sends x-goog-api-key. The front door reads a token from it on the
// face's paths only.
func KeyHeader(k Kind) string { return sdks[k].keyHeader }

// Proxied reports whether face k serves an output Pollux keeps no copy of
// through Pollux — the provider's bytes, fetched with no credential —
// rather than redirect the app to the provider's URL: its SDK downloads
// with the app's key, which a redirect would carry to the provider's
// origin. The one place this is decided (Kit.Output, Kit.ServeOutput).
func Proxied(k Kind) bool { return sdks[k].downloadsWithKey }

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

// MetaFace is the metadata key a face's create writes on its job: the
// face's Kind. A face sees only the jobs that carry its own (Kit.Job).
const MetaFace = faceshape.MetaFace

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
	// RecordGrace is how long Kit.Job waits for a record that does not
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

// OutagePollAfter is the least time a face tells an app to wait before it
// asks again about a job it answered from what it last knew (Kit.Poll):
// nothing Pollux knows of the job changes before NATS is back, and an app
// that asks this often learns the news within seconds of it.
const OutagePollAfter = 5 * time.Second

// Pollux is what a face asks of Pollux; the front door implements it. A
// face asks it only through its Kit, which decides what the face may see.
// Each method is answered from Pollux's own state: none calls a provider.
// An error the front door explains (an invalid field, NATS unavailable)
// is a *Error a face writes in its shape (Serve does).
type Pollux interface {
	// Submit publishes submission m (its ID set) on route, as request r's
	// caller; it returns once the message is durable in the intake
	// stream, so the job will be created and is never created twice.
	// A contract violation is a *Error, 400, naming the field.
	Submit(ctx context.Context, r *http.Request, route string, m events.Submit) error
	// Job reads job id's record; state.ErrNotFound when there is none
	// (yet: a submission has a record once ingest has taken it). While
	// records cannot be read (NATS unavailable) it answers a 503 *Error
	// whose Err is an *Outage carrying the record this process last read
	// of the job — at once, when it knows the connection is down and the
	// read is a poll of a job it has read before (Polling); else once it
	// has waited a moment for the connection to come back.
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
	// Output writes output n of job j: the bytes output custody kept
	// (Saved), else — when proxy — the provider's bytes, fetched with no
	// credential, following no redirect and refusing private addresses
	// unless the route allows them, else a redirect to the provider's URL
	// (ProviderURL); ErrOutputNotFound when the job has no such output.
	// Nothing is written when it returns an error.
	Output(w http.ResponseWriter, r *http.Request, j *state.Job, n int, proxy bool) error
	// Files are request r's caller's input files (its token's, by the
	// name the front door knows it by), in Pollux's inputs bucket; a
	// *Error when this Pollux keeps none (NoFiles). A create whose input
	// names a file (pollux-input://) is checked by Submit: each must be
	// the caller's and not expired, or the create is refused naming the
	// field.
	Files(r *http.Request) (*Files, error)
	// KeepsOutputs reports whether route keeps its succeeded jobs'
	// outputs (its keep_outputs): output custody copies them, and Output
	// serves the copies.
	KeepsOutputs(route string) bool
	// Webhooks is what this Pollux does with a webhook URL of request r's
	// caller's own (a Replicate create's webhook): nil when it calls none
	// (the configuration sets no notify.submissions).
	Webhooks(r *http.Request) *Webhooks
}

// Webhooks is how this Pollux calls apps' own webhook URLs.
type Webhooks struct {
	// AllowPrivate lets a webhook URL reach private and loopback
	// addresses (notify.submissions.allow_private; safehttp.CheckURL).
	AllowPrivate bool
	// Secret is the caller's signing secret as Replicate shows one,
	// "whsec_…": signature.DeriveSecret of the current server secret
	// (notify.submissions' first) and the caller's token name.
	Secret string
}

// Face is what the front door asks of a face, and what Serve writes a
// handler's error with.
type Face interface {
	// Handler serves the face's endpoints, below its mount's prefix
	// (stripped).
	Handler() http.Handler
	// WriteError writes e in the provider's own error shape.
	WriteError(w http.ResponseWriter, e *Error)
	// Logger receives what the face could not answer in its own terms:
	// an unexpected error, which Serve answers 503.
	Logger() *zerolog.Logger
}

// New builds a face of a mount over Pollux.
type New func(m Mount, p Pollux) Face

// IDBytes returns n bytes (at most 32) a face formats as a job id: derived
// from the route, the caller's app (the viewer ctx carries: tenant.From)
// and key when key is not empty — the same create retried with the same
// key has the same id, so Pollux makes it one job, while another app's
// same key is another job and tells it nothing — and random otherwise.
func IDBytes(ctx context.Context, k Kind, route, key string, n int) []byte {
	if key == "" {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return b
	}
	seed := "pollux face id v1\x00" + string(k) + "\x00" + route + "\x00" + key
	if v := tenant.From(ctx); v.Scoped && v.App != "" {
		seed = "pollux face id v2\x00" + string(k) + "\x00" + route + "\x00" + v.App + "\x00" + key
	}
	sum := sha256.Sum256([]byte(seed))
	return sum[:n]
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
