package facetest

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Harness is what one face gives the conformance suite (Conformance):
// how to build it, what its jobs look like, and its requests about a
// job.
type Harness struct {
	// Kind is the face's kind, New builds it.
	Kind face.Kind
	New  face.New
	// ID is a job id of the face's shape (one it could have minted).
	ID string
	// Meta is the metadata the face's create writes on a job besides
	// face.MetaFace (nil: none).
	Meta map[string]string
	// Verbs are the face's requests about job id, by name — every one it
	// serves: each builds the request as the face's handler sees it (its
	// path below the mount).
	Verbs map[string]func(id string) *http.Request
}

// The routes the suite mounts a face on: a route, and a model route
// whose members include it.
const (
	conformanceRoute      = "sim"
	conformanceModelRoute = "video"
)

// Conformance holds face h to what every face promises:
//
//   - a job the face may not see — another route's, one the face did not
//     make (no face metadata, or another face's), one submitted through a
//     model route to a member route the face is mounted on, one of
//     another model route — is answered, by every verb, exactly as an
//     unknown id is (status and body), and no verb cancels it;
//   - a job it made on its route, and one submitted through the model
//     route it is mounted on, are not answered as unknown.
func Conformance(t *testing.T, h Harness) {
	t.Helper()
	require.NotEmpty(t, h.Verbs, "a face answers about a job")
	made := func(route string, routing *state.Routing, kind string) *state.Job {
		md := maps.Clone(h.Meta)
		if md == nil {
			md = map[string]string{}
		}
		if kind != "" {
			md[face.MetaFace] = kind
		}
		return &state.Job{ID: h.ID, Route: route, Routing: routing, Model: "acme/video", State: state.Running,
			CreatedAt: time.Now().UTC(), Metadata: md}
	}
	mine := string(h.Kind)
	other := string(face.Replicate)
	if h.Kind == face.Replicate {
		other = string(face.Fal)
	}
	hidden := map[string]struct {
		mount string
		job   *state.Job
	}{
		"another route's":                  {conformanceRoute, made("elsewhere", nil, mine)},
		"made elsewhere (no face)":         {conformanceRoute, made(conformanceRoute, nil, "")},
		"another face's":                   {conformanceRoute, made(conformanceRoute, nil, other)},
		"a model route's, on this route":   {conformanceRoute, made(conformanceRoute, &state.Routing{Via: conformanceModelRoute}, mine)},
		"another model route's, on member": {conformanceModelRoute, made(conformanceRoute, &state.Routing{Via: "other-models"}, mine)},
		"a member route's, not routed":     {conformanceModelRoute, made(conformanceRoute, nil, mine)},
	}
	seen := map[string]struct {
		mount string
		job   *state.Job
	}{
		"its own":                 {conformanceRoute, made(conformanceRoute, nil, mine)},
		"through its model route": {conformanceModelRoute, made("member", &state.Routing{Via: conformanceModelRoute}, mine)},
	}
	for verb, build := range h.Verbs {
		t.Run(verb, func(t *testing.T) {
			t.Parallel()
			for _, mount := range []string{conformanceRoute, conformanceModelRoute} {
				unknown := serve(t, h, mount, nil, build)
				require.Equal(t, http.StatusNotFound, unknown.Code, "%s on %s: an unknown id: %s", verb, mount, unknown.Body)
				for name, c := range hidden {
					if c.mount != mount {
						continue
					}
					got := serve(t, h, mount, c.job, build)
					require.Equal(t, unknown.Code, got.Code, "%s of %s: as an unknown id: %s", verb, name, got.Body)
					require.Equal(t, unknown.Body.String(), got.Body.String(), "%s of %s: as an unknown id", verb, name)
				}
				for name, c := range seen {
					if c.mount != mount {
						continue
					}
					got := serve(t, h, mount, c.job, build)
					require.False(t, got.Code == unknown.Code && got.Body.String() == unknown.Body.String(),
						"%s of %s: answered as an unknown id: %s", verb, name, got.Body)
				}
			}
		})
	}
}

// serve builds face h mounted on route over a Pollux holding j (if not
// nil), sends it build's request about h.ID, and checks no cancel of a
// job it was not to see was asked for.
func serve(t *testing.T, h Harness, route string, j *state.Job, build func(string) *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	p := New()
	if j != nil {
		p.Put(j)
	}
	f := h.New(face.Mount{Kind: h.Kind, Route: route, Prefix: face.Prefix(h.Kind, route), RecordGrace: 20 * time.Millisecond}, p)
	rec := httptest.NewRecorder()
	f.Handler().ServeHTTP(rec, build(h.ID))
	if rec.Code == http.StatusNotFound {
		require.Empty(t, p.Cancels(), "a job the face may not see is not canceled")
	}
	return rec
}
