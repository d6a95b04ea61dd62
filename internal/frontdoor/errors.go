package frontdoor

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Code is a stable error code of the front door's JSON errors. Codes are
// part of the contract: new ones may be added, existing ones keep their
// meaning.
type Code string

// The error codes, with the HTTP status each comes with.
const (
	// CodeInvalidBody (400): the body is not a JSON object or the message
	// as a whole is invalid.
	CodeInvalidBody Code = "invalid_body"
	// CodeInvalidField (400): a field of the body is invalid; field names it.
	CodeInvalidField Code = "invalid_field"
	// CodeInvalidParameter (400): a path segment, query parameter or header
	// is invalid; field names it.
	CodeInvalidParameter Code = "invalid_parameter"
	// CodeIdempotencyKeyMismatch (400): the Idempotency-Key header and the
	// body's idempotency_key differ.
	CodeIdempotencyKeyMismatch Code = "idempotency_key_mismatch"
	// CodeUnknownRoute (404): no route of that name is configured.
	CodeUnknownRoute Code = "unknown_route"
	// CodeJobNotFound (404): no job has that id (yet: a submission is
	// visible once ingest has taken it).
	CodeJobNotFound Code = "job_not_found"
	// CodeUnauthorized (401): the front door takes bearer tokens and the
	// request carried none, or one it does not accept; see the
	// WWW-Authenticate header.
	CodeUnauthorized Code = "unauthorized"
	// CodeNotFound (404): no such endpoint.
	CodeNotFound Code = "not_found"
	// CodeMethodNotAllowed (405): the endpoint does not take that method;
	// the Allow header lists the one it takes.
	CodeMethodNotAllowed Code = "method_not_allowed"
	// CodeJobTerminal (409): the job has finished and cannot be canceled.
	CodeJobTerminal Code = "job_terminal"
	// CodeBodyTooLarge (413): the body is larger than the limit.
	CodeBodyTooLarge Code = "body_too_large"
	// CodeUnsupportedMediaType (415): the body is not application/json.
	CodeUnsupportedMediaType Code = "unsupported_media_type"
	// CodeTooManyStreams (429): every event stream slot is taken; retry
	// after the Retry-After header's seconds.
	CodeTooManyStreams Code = "too_many_streams"
	// CodeUnavailable (503): NATS did not answer in time or refused the
	// message (the intake stream is full, say); retry after the
	// Retry-After header's seconds.
	CodeUnavailable Code = "unavailable"
)

// Codes lists every error code.
var Codes = []Code{
	CodeInvalidBody, CodeInvalidField, CodeInvalidParameter, CodeIdempotencyKeyMismatch,
	CodeUnauthorized, CodeUnknownRoute, CodeJobNotFound, CodeNotFound, CodeMethodNotAllowed, CodeJobTerminal,
	CodeBodyTooLarge, CodeUnsupportedMediaType, CodeTooManyStreams, CodeUnavailable,
}

// retryAfter is what a 429 or 503 asks the caller to wait.
const retryAfter = 2 * time.Second

// Error is the body of every error response.
type Error struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong.
type ErrorDetail struct {
	// Code is the stable error code.
	Code Code `json:"code"`
	// Message explains the problem to a human.
	Message string `json:"message"`
	// Field names the offending body field, path segment, query parameter
	// or header, when there is one.
	Field string `json:"field,omitempty"`
}

// apiError is an error response about to be written.
type apiError struct {
	status int
	detail ErrorDetail
}

func fail(status int, code Code, field, message string) *apiError {
	return &apiError{status: status, detail: ErrorDetail{Code: code, Message: message, Field: field}}
}

func (e *apiError) write(w http.ResponseWriter) {
	if e.status == http.StatusTooManyRequests || e.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(int(retryAfter.Seconds())))
	}
	writeJSON(w, e.status, Error{Error: e.detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
