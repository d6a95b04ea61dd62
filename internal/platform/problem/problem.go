// Package problem is the JSON error body every Pollux HTTP endpoint (the
// front door, the webhook receiver) answers a failed request with:
//
//	{"error": {"code": "invalid_field", "message": "...", "field": "model"}}
//
// The code is stable (part of the contract: new codes may be added,
// existing ones keep their meaning), the message is for humans, and the
// field names the offending body field, path segment, query parameter or
// header when there is one.
package problem

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Code is a stable error code.
type Code string

// The codes both the front door and the webhook receiver answer with, with
// the HTTP status each comes with.
const (
	// CodeInvalidParameter (400): a path segment, query parameter or header
	// is invalid; field names it.
	CodeInvalidParameter Code = "invalid_parameter"
	// CodeNotFound (404): no such endpoint.
	CodeNotFound Code = "not_found"
	// CodeMethodNotAllowed (405): the endpoint does not take that method;
	// the Allow header lists the one it takes.
	CodeMethodNotAllowed Code = "method_not_allowed"
	// CodeBodyTooLarge (413): the body is larger than the limit.
	CodeBodyTooLarge Code = "body_too_large"
	// CodeUnsupportedMediaType (415): the body's type or encoding is not
	// accepted.
	CodeUnsupportedMediaType Code = "unsupported_media_type"
	// CodeUnavailable (503): NATS did not answer in time or refused the
	// message; retry after the Retry-After header's seconds.
	CodeUnavailable Code = "unavailable"
)

// Body is the body of every error response.
type Body struct {
	Error Detail `json:"error"`
}

// Detail says what went wrong.
type Detail struct {
	// Code is the stable error code.
	Code Code `json:"code"`
	// Message explains the problem to a human.
	Message string `json:"message"`
	// Field names the offending body field, path segment, query parameter
	// or header, when there is one.
	Field string `json:"field,omitempty"`
	// Budget says which budget refused a create (budget_exceeded).
	Budget *Budget `json:"budget,omitempty"`
}

// Budget is the spend budget that refused a create.
type Budget struct {
	// Period is day or month (a spend budget), or waiting (an app's
	// max_waiting: Budget and Spent are the cap); Budget its limit, Spent
	// what it counts so far, Estimate the refused job's estimate.
	// Of is whose limit it is: "app <name>", "route <name>" or "account
	// <name>".
	Of       string  `json:"of"`
	Period   string  `json:"period"`
	Budget   float64 `json:"budget"`
	Spent    float64 `json:"spent"`
	Estimate float64 `json:"estimate,omitempty"`
	// ResetsAt is when the period ends (none for waiting).
	ResetsAt time.Time `json:"resets_at,omitzero"`
}

// RetryAfter is what a 429 or 503 asks the caller to wait.
const RetryAfter = 2 * time.Second

// Write answers with status and the problem body of d; a 429 or 503 also
// says when to retry (RetryAfter, unless the response says already).
func Write(w http.ResponseWriter, status int, d Detail) {
	if (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", strconv.Itoa(int(RetryAfter.Seconds())))
	}
	WriteJSON(w, status, Body{Error: d})
}

// NotFound answers every request with 404 not_found: no endpoint at its
// path (followed by hint, when set). It is the catch-all of a server's
// routes, so a wrong path gets the same body as every other error instead
// of net/http's plain-text page.
func NotFound(hint string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		msg := "no endpoint at " + r.URL.Path
		if hint != "" {
			msg += "; " + hint
		}
		Write(w, http.StatusNotFound, Detail{Code: CodeNotFound, Message: msg})
	})
}

// MethodNotAllowed answers 405 method_not_allowed to a request for an
// endpoint that takes method only, naming it in the Allow header.
func MethodNotAllowed(w http.ResponseWriter, r *http.Request, method string) {
	w.Header().Set("Allow", method)
	Write(w, http.StatusMethodNotAllowed, Detail{Code: CodeMethodNotAllowed, Message: r.URL.Path + " takes " + method + " only"})
}

// WriteJSON answers with status and v as JSON, never cached.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
