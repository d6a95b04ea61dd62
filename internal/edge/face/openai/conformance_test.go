package openai_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/face/facetest"
	"github.com/pollux-dev/pollux/internal/edge/face/openai"
)

// The face keeps what every face promises: a video it may not see is an
// unknown one, whatever the verb — a retrieve of another route's video
// is 404, and a delete of it cancels nothing.
func TestConformance(t *testing.T) {
	t.Parallel()
	verb := func(method, suffix string) func(id string) *http.Request {
		return func(id string) *http.Request { return httptest.NewRequest(method, "/v1/videos/"+id+suffix, nil) }
	}
	facetest.Conformance(t, facetest.Harness{
		Kind: face.OpenAI, New: openai.New, ID: "video_0123456789abcdef0123456789abcdef",
		Meta: map[string]string{"openai_model": "sora-2"},
		Poll: "retrieve",
		Verbs: map[string]func(id string) *http.Request{
			"retrieve": verb(http.MethodGet, ""),
			"content":  verb(http.MethodGet, "/content"),
			"delete":   verb(http.MethodDelete, ""),
		},
	})
}
