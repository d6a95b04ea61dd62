package fal

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/face/facetest"
)

// The face keeps what every face promises: a request it may not see is
// an unknown one, whatever the verb.
func TestConformance(t *testing.T) {
	t.Parallel()
	verb := func(method, suffix string) func(id string) *http.Request {
		return func(id string) *http.Request {
			r := httptest.NewRequest(method, "/", nil)
			r.Header.Set(TargetHeader, requestURL(id, suffix))
			return r
		}
	}
	facetest.Conformance(t, facetest.Harness{
		Kind: face.Fal, New: New, ID: uuid([]byte("conformance-0001")),
		Meta: map[string]string{MetaApp: "acme/video"},
		Poll: "status",
		Verbs: map[string]func(id string) *http.Request{
			"status": verb(http.MethodGet, "/status"),
			"result": verb(http.MethodGet, ""),
			"cancel": verb(http.MethodPut, "/cancel"),
			"output": func(id string) *http.Request { return httptest.NewRequest(http.MethodGet, "/outputs/"+id+"/0", nil) },
		},
	})
}
