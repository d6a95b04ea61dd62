package frontdoor

import (
	"net/http"
	"time"

	"github.com/pollux-dev/pollux/internal/platform/problem"
)

// Code is a stable error code of the front door's JSON errors (the body
// of package problem, which the webhook receiver answers with too). Codes
// are part of the contract: new ones may be added, existing ones keep
// their meaning.
type Code = problem.Code

// The error codes, with the HTTP status each comes with.
const (
	// CodeInvalidBody (400): the body is not a JSON object or the message
	// as a whole is invalid.
	CodeInvalidBody Code = "invalid_body"
	// CodeInvalidField (400): a field of the body is invalid; field names it.
	CodeInvalidField Code = "invalid_field"
	// CodeInvalidParameter (400): a path segment, query parameter or header
	// is invalid; field names it.
	CodeInvalidParameter = problem.CodeInvalidParameter
	// CodeIdempotencyKeyMismatch (400): the Idempotency-Key header and the
	// body's idempotency_key differ.
	CodeIdempotencyKeyMismatch Code = "idempotency_key_mismatch"
	// CodeUnknownRoute (404): no route of that name is configured.
	CodeUnknownRoute Code = "unknown_route"
	// CodeJobNotFound (404): no job has that id (yet: a submission is
	// visible once ingest has taken it).
	CodeJobNotFound Code = "job_not_found"
	// CodeOutputNotKept (404): the job's output of that index is not in
	// the outputs bucket: not saved (its route keeps no outputs, it is
	// being copied, it was gone, too large or failed) or past the
	// bucket's TTL.
	CodeOutputNotKept Code = "output_not_kept"
	// CodeModelNotFound (404): nothing is learned yet of that model on
	// that route.
	CodeModelNotFound Code = "model_not_found"
	// CodeUnauthorized (401): the front door takes bearer tokens and the
	// request carried none, or one it does not accept; see the
	// WWW-Authenticate header.
	CodeUnauthorized Code = "unauthorized"
	// CodeForbidden (403): the request may not do this: a read-only token
	// acting, a browser's request without its CSRF token, or a request
	// from another site (its Origin is not this host).
	CodeForbidden Code = "forbidden"
	// CodeHostNotAllowed (421): the request's Host is not one this front
	// door answers: without tokens (or with Config.AllowedHosts) only
	// localhost, a loopback address or an allowed name is; field is
	// "Host".
	CodeHostNotAllowed Code = "host_not_allowed"
	// CodeNotFound (404): no such endpoint.
	CodeNotFound = problem.CodeNotFound
	// CodeMethodNotAllowed (405): the endpoint does not take that method;
	// the Allow header lists the one it takes.
	CodeMethodNotAllowed = problem.CodeMethodNotAllowed
	// CodeJobTerminal (409): the job has finished and cannot be canceled.
	CodeJobTerminal Code = "job_terminal"
	// CodeNotPaused (409): the route has no operator's pause to resume.
	CodeNotPaused Code = "not_paused"
	// CodeNotResubmittable (409): the job cannot be resubmitted (it did
	// not fail, get lost or expire; it is a hedge; its resubmission's id
	// is taken).
	CodeNotResubmittable Code = "not_resubmittable"
	// CodeInputNotKept (409): the job reached its provider and Pollux kept
	// no input to resubmit it with; send one.
	CodeInputNotKept Code = "input_not_kept"
	// CodeConfirmMismatch (409): a bulk action's confirm is not the
	// number of jobs it matches now; look again (a dry run) and confirm
	// that.
	CodeConfirmMismatch Code = "confirm_mismatch"
	// CodeTooManyJobs (422): a bulk action matches more jobs than one
	// call acts on; narrow its filter.
	CodeTooManyJobs Code = "too_many_jobs"
	// CodeBodyTooLarge (413): the body is larger than the limit.
	CodeBodyTooLarge = problem.CodeBodyTooLarge
	// CodeUnsupportedMediaType (415): the body is not application/json.
	CodeUnsupportedMediaType = problem.CodeUnsupportedMediaType
	// CodeTooManyStreams (429): every event stream slot is taken; retry
	// after the Retry-After header's seconds.
	CodeTooManyStreams Code = "too_many_streams"
	// CodeTooManyRequests (429): the request's token has spent its quota
	// (rate= in the tokens file); retry after the Retry-After header's
	// seconds.
	CodeTooManyRequests Code = "too_many_requests"
	// CodeBudgetExceeded (429): the create would pass its app's spend
	// budget (field app; budget says which, what is spent and when it
	// resets); retry after the Retry-After header's seconds, when it does.
	CodeBudgetExceeded Code = "budget_exceeded"
	// CodeUnavailable (503): NATS did not answer in time or refused the
	// message (the intake stream is full, say); retry after the
	// Retry-After header's seconds.
	CodeUnavailable = problem.CodeUnavailable
)

// Codes lists every error code.
var Codes = []Code{
	CodeInvalidBody, CodeInvalidField, CodeInvalidParameter, CodeIdempotencyKeyMismatch,
	CodeUnauthorized, CodeForbidden, CodeUnknownRoute, CodeJobNotFound, CodeOutputNotKept, CodeModelNotFound, CodeNotFound, CodeMethodNotAllowed,
	CodeHostNotAllowed, CodeJobTerminal, CodeNotPaused, CodeNotResubmittable, CodeInputNotKept, CodeConfirmMismatch, CodeTooManyJobs,
	CodeBodyTooLarge, CodeUnsupportedMediaType, CodeTooManyStreams, CodeTooManyRequests, CodeBudgetExceeded, CodeUnavailable,
}

// Error is the body of every error response.
type Error = problem.Body

// ErrorDetail says what went wrong.
type ErrorDetail = problem.Detail

// apiError is an error response about to be written.
type apiError struct {
	status int
	detail ErrorDetail
	header http.Header // set on the response before it is written
	// retryAfter is the wait a 429 or 503 asks for, for a face's own
	// headers.
	retryAfter time.Duration
}

func fail(status int, code Code, field, message string) *apiError {
	return &apiError{status: status, detail: ErrorDetail{Code: code, Message: message, Field: field}}
}

func (e *apiError) write(w http.ResponseWriter) {
	for k, v := range e.header {
		w.Header()[k] = v
	}
	problem.Write(w, e.status, e.detail)
}

func writeJSON(w http.ResponseWriter, status int, v any) { problem.WriteJSON(w, status, v) }
