package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// Class is an error class; it decides how Pollux reacts to a failed call.
type Class int

// Error classes.
const (
	// Transient: 5xx, timeouts, connection failures, unreadable answers.
	Transient Class = iota
	// RateLimited: the provider asked Pollux to slow down.
	RateLimited
	// Auth: the credentials were refused.
	Auth
	// Invalid: the provider refused the request itself.
	Invalid
	// NotFound: the provider does not know the job.
	NotFound
)

func (c Class) String() string {
	switch c {
	case RateLimited:
		return "rate_limited"
	case Auth:
		return "auth"
	case Invalid:
		return "invalid"
	case NotFound:
		return "not_found"
	}
	return "transient"
}

// Error is a classified provider failure.
type Error struct {
	// Class decides the reaction.
	Class Class
	// HTTPStatus is the response status, 0 when there was none.
	HTTPStatus int
	// RetryAfter is the provider's requested pause, 0 when none was given.
	RetryAfter time.Duration
	// Concurrency marks a rate limit the provider says is about jobs
	// running at once, not about calls per second (a concurrency cap:
	// httpapi.Classify reads it from the body). Pollux learns a running
	// cap from such refusals, a call rate from the others.
	Concurrency bool
	// Message is the provider's explanation (its error detail), safe to
	// log and to show in a failed job's reason.
	Message string
	// Err is the underlying error, if any.
	Err error
}

func (e *Error) Error() string {
	msg := e.Class.String()
	if e.HTTPStatus != 0 {
		msg += fmt.Sprintf(" (HTTP %d)", e.HTTPStatus)
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// ClassOf returns the class of err: the class of a wrapped *Error, Transient
// for timeouts, connection failures and anything unclassified.
func ClassOf(err error) Class {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Class
	}
	return Transient
}

// RetryAfterOf returns the provider's requested pause carried by err, or 0.
func RetryAfterOf(err error) time.Duration {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.RetryAfter
	}
	return 0
}

// ConcurrencyLimited reports whether err is a rate limit the provider
// says is about jobs running at once (Error.Concurrency).
func ConcurrencyLimited(err error) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.Class == RateLimited && pe.Concurrency
}

// MessageOf returns the provider's explanation carried by err, or err's text.
func MessageOf(err error) string {
	var pe *Error
	if errors.As(err, &pe) && pe.Message != "" {
		return pe.Message
	}
	return err.Error()
}

// IsTimeout reports whether err is a timeout or a canceled context.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
