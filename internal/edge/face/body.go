package face

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// ReadBody reads a create's JSON body, at most limit bytes: its
// Content-Type, when it has one, must be application/json (415), a larger
// body is refused (413), and one that cannot be read is a 400. What the
// JSON must say is the face's to check. The Error is in Pollux's terms; a
// face writes it in its provider's shape.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *Error) {
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
		return nil, &Error{Status: http.StatusBadRequest, Code: "invalid_body", Message: "reading the body failed"}
	}
	return body, nil
}
