package face

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Error is an error a face writes in its provider's shape: the front
// door's refusals (a bad token, a read-only token acting, an exceeded
// quota, NATS unavailable), a Pollux method's, and a face's own. A
// handler returns it (wrapped or not) and Serve writes it with the face's
// WriteError.
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
	// Err is what caused it, if anything: errors.Is and errors.As see
	// it; the app does not.
	Err error
}

// Error says the code and the message.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Unwrap is the cause.
func (e *Error) Unwrap() error { return e.Err }

// SetHeaders sets e's headers on h, an answer's headers: e.Header, and
// Retry-After in whole seconds, rounded up, when e.RetryAfter is
// positive. Every face's WriteError starts with it.
func (e *Error) SetHeaders(h http.Header) {
	for k, v := range e.Header {
		h[k] = v
	}
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(e.RetryAfter.Seconds())), 10))
	}
}

// Unavailable is the answer to an error a face did not expect: a 503 its
// SDK retries after a second.
func Unavailable() *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: "unavailable",
		Message: "Pollux could not answer the request; retry later", RetryAfter: time.Second}
}

// Outage is why a Pollux cannot read a job's record now: NATS is
// unavailable (the connection is down, or the read went unanswered). A
// Pollux's Job returns it inside the 503 *Error it answers then (as its
// Err), with what this process last read of the job, so that a face
// answers an app that polls a job it knows through the outage: Kit.Job
// answers a job whose last record had ended from that record (an ended
// job never changes), and Kit.Poll also a job still under way, as not
// ended.
type Outage struct {
	// Last is the job's record as this process last read it, nil when it
	// read none. The kit may change its fields, not its maps and slices.
	Last *state.Job
	// Err is the failure of the read (nil when none was tried: the
	// connection was known to be down).
	Err error
}

// Error says records cannot be read, and why.
func (o *Outage) Error() string {
	if o.Err == nil {
		return "job records cannot be read now: NATS is unavailable"
	}
	return "job records cannot be read now: " + o.Err.Error()
}

// Unwrap is the read's failure.
func (o *Outage) Unwrap() error { return o.Err }

// Handler is a face's endpoint: it writes its answer and returns nil, or
// writes nothing and returns why it cannot answer.
type Handler func(w http.ResponseWriter, r *http.Request) error

// Serve is h as an http.Handler of face f: an error h returns is written
// in f's shape — a *Error (wrapped or not) as it says, anything else
// logged and answered Unavailable, so no error reaches an SDK in any
// shape but its provider's.
func Serve(f Face, h Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		var e *Error
		if !errors.As(err, &e) {
			f.Logger().Warn().Err(err).Str(logkey.Method, r.Method).Str(logkey.Path, r.URL.Path).Msg("a face's request failed")
			e = Unavailable()
		}
		f.WriteError(w, e)
	})
}
