package replicate

import (
	"encoding/json"
	"net/http"

	"github.com/pollux-dev/pollux/internal/edge/face"
)

// problem is Replicate's error body (an RFC 9457 problem): the SDK's
// ApiError carries the status and this text in its message.
type problem struct {
	Title         string         `json:"title"`
	Detail        string         `json:"detail"`
	Status        int            `json:"status"`
	Code          string         `json:"code,omitempty"`
	InvalidFields []invalidField `json:"invalid_fields,omitempty"`
}

// invalidField names a field at fault, as Replicate's 422 answers do.
type invalidField struct {
	Type        string `json:"type"`
	Field       string `json:"field"`
	Description string `json:"description"`
}

// titles are Replicate's problem titles by status.
var titles = map[int]string{
	http.StatusBadRequest:            "Bad request",
	http.StatusUnauthorized:          "Unauthenticated",
	http.StatusForbidden:             "Permission denied",
	http.StatusNotFound:              "Not found",
	http.StatusMisdirectedRequest:    "Misdirected request",
	http.StatusConflict:              "Conflict",
	http.StatusRequestEntityTooLarge: "Request entity too large",
	http.StatusUnsupportedMediaType:  "Unsupported media type",
	http.StatusUnprocessableEntity:   "Input validation failed",
	http.StatusTooManyRequests:       "Too many requests",
	http.StatusServiceUnavailable:    "Service unavailable",
}

// WriteError writes e as Replicate does: a problem body with the status,
// the field at fault in invalid_fields, and Retry-After when set.
func (f *Face) WriteError(w http.ResponseWriter, e *face.Error) {
	h := w.Header()
	e.SetHeaders(h)
	p := problem{Title: titles[e.Status], Detail: e.Message, Status: e.Status, Code: e.Code}
	if p.Title == "" {
		p.Title = http.StatusText(e.Status)
	}
	if p.Detail == "" {
		p.Detail = p.Title
	}
	if e.Field != "" {
		p.InvalidFields = []invalidField{{Type: "invalid", Field: e.Field, Description: e.Message}}
	}
	h.Set("Content-Type", "application/problem+json")
	h.Del("Content-Length")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// Errors of the face's own.
func notFound(what string) *face.Error {
	return &face.Error{Status: http.StatusNotFound, Code: "not_found", Message: what}
}

func invalid(field, message string) *face.Error {
	return &face.Error{Status: http.StatusUnprocessableEntity, Code: "invalid_field", Field: field, Message: message}
}

func badRequest(field, message string) *face.Error {
	return &face.Error{Status: http.StatusBadRequest, Code: "invalid_body", Field: field, Message: message}
}
