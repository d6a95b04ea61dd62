package face_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
)

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// A create's body is JSON (or untyped) and bounded; what is refused says
// why, with the status every face answers it with.
func TestReadBody(t *testing.T) {
	t.Parallel()
	const limit = 16
	for _, c := range []struct {
		name, contentType string
		body              io.Reader
		status            int
		code, field       string
	}{
		{"untyped", "", strings.NewReader(`{}`), 0, "", ""},
		{"json", "application/json", strings.NewReader(`{"a":1}`), 0, "", ""},
		{"json with charset", "application/json; charset=utf-8", strings.NewReader(`{}`), 0, "", ""},
		{"at the limit", "application/json", strings.NewReader(strings.Repeat("x", limit)), 0, "", ""},
		{"another type", "text/plain", strings.NewReader(`{}`), http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type"},
		{"a type that does not parse", "application/", strings.NewReader(`{}`), http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type"},
		{"past the limit", "application/json", strings.NewReader(strings.Repeat("x", limit+1)), http.StatusRequestEntityTooLarge, "body_too_large", ""},
		{"unreadable", "application/json", failingReader{}, http.StatusBadRequest, "invalid_body", ""},
	} {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", c.body)
		if c.contentType != "" {
			r.Header.Set("Content-Type", c.contentType)
		}
		b, err := face.ReadBody(httptest.NewRecorder(), r, limit)
		if c.status == 0 {
			require.NoError(t, err, c.name)
			require.NotEmpty(t, b, c.name)
			continue
		}
		var e *face.Error
		require.ErrorAs(t, err, &e, c.name)
		require.Nil(t, b, c.name)
		require.Equal(t, c.status, e.Status, c.name)
		require.Equal(t, c.code, e.Code, c.name)
		require.Equal(t, c.field, e.Field, c.name)
		require.NotEmpty(t, e.Message, c.name)
	}
}
