package replicate_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/face/facetest"
	"github.com/pollux-dev/pollux/internal/edge/face/replicate"
)

// The face keeps what every face promises: a prediction it may not see
// is an unknown one, whatever the verb.
func TestConformance(t *testing.T) {
	t.Parallel()
	facetest.Conformance(t, facetest.Harness{
		Kind: face.Replicate, New: replicate.New, ID: "abcdefghijklmnopqrstuvwxyz",
		Meta: map[string]string{"replicate_model": "acme/video"},
		Poll: "get",
		Verbs: map[string]func(id string) *http.Request{
			"get": func(id string) *http.Request { return httptest.NewRequest(http.MethodGet, "/v1/predictions/"+id, nil) },
			"cancel": func(id string) *http.Request {
				return httptest.NewRequest(http.MethodPost, "/v1/predictions/"+id+"/cancel", nil)
			},
			"output": func(id string) *http.Request { return httptest.NewRequest(http.MethodGet, "/outputs/"+id+"/0", nil) },
		},
	})
}
