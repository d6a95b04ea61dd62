package face

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/pollux-dev/pollux/pkg/events"
)

// ReadBody reads a create's JSON body, at most limit bytes: its
// Content-Type, when it has one, must be application/json (415), a larger
// body is refused (413), and one that cannot be read is a 400. What the
// JSON must say is the face's to check. A refusal is a *Error in Pollux's
// terms, which Serve writes in the face's shape.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return nil, &Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type", Field: "Content-Type",
				Message: "the body must be application/json"}
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
				Message: fmt.Sprintf("the body is larger than %d bytes", limit)}
		}
		return nil, &Error{Status: http.StatusBadRequest, Code: "invalid_body", Message: "reading the body failed", Err: err}
	}
	return body, nil
}

// IdempotencyKey is a create's idempotency key: its Idempotency-Key
// header, bounded as the contract bounds a submission's key (a *Error
// naming the header past it).
func IdempotencyKey(r *http.Request) (string, error) {
	key := r.Header.Get("Idempotency-Key")
	if len(key) > events.MaxKeyLen {
		return "", &Error{Status: http.StatusBadRequest, Code: "invalid_parameter", Field: "Idempotency-Key",
			Message: "Idempotency-Key: at most " + strconv.Itoa(events.MaxKeyLen) + " bytes"}
	}
	return key, nil
}

// WriteJSON answers v as JSON with status. It encodes v before it writes
// anything, so a value that does not encode is an error Serve answers;
// a client gone while the answer is written is not the face's error.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding the answer: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
	return nil
}
