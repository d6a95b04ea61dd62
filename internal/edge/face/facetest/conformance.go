package facetest

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
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
	// Poll names the verb an app polls a job with until it ends (a get,
	// a status): the one answered through an outage from what the face
	// last knew (face.Kit.Poll).
	Poll string
	// AlsoPoll names the other verbs an app polls with, if any (a face
	// of two APIs, each with its get), each held to what Poll is.
	AlsoPoll []string
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
//     route it is mounted on, are not answered as unknown;
//   - through an outage (records cannot be read, see Outage): an unknown
//     id is a 503 with Retry-After, and a job the face may not see is
//     answered exactly as it; a job that had ended is answered by every
//     verb as before the outage; a job under way is answered by the Poll
//     verb as before the outage — even when it has ended since, which
//     the face cannot know — and by every other verb with the 503.
func Conformance(t *testing.T, h Harness) {
	t.Helper()
	require.NotEmpty(t, h.Verbs, "a face answers about a job")
	require.Contains(t, h.Verbs, h.Poll, "Poll names one of the verbs")
	t.Run("through an outage", func(t *testing.T) {
		t.Parallel()
		conformOutage(t, h)
	})
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

// conformOutage is Conformance's outage part.
func conformOutage(t *testing.T, h Harness) {
	job := func(route string, s state.State) *state.Job {
		md := maps.Clone(h.Meta)
		if md == nil {
			md = map[string]string{}
		}
		md[face.MetaFace] = string(h.Kind)
		j := &state.Job{ID: h.ID, Route: route, Model: "acme/video", State: s, RemoteID: "r-1",
			CreatedAt: time.Now().UTC().Add(-time.Minute), Metadata: md}
		if s.Terminal() {
			j.CompletedAt, j.Outputs = time.Now().UTC(), []string{"https://provider.example/out.mp4"}
		}
		return j
	}
	for verb, build := range h.Verbs {
		unknown := serveOutage(t, h, nil, nil, build)
		require.Equal(t, http.StatusServiceUnavailable, unknown.Code, "%s of an unknown id through an outage: %s", verb, unknown.Body)
		require.NotEmpty(t, unknown.Header().Get("Retry-After"), "%s of an unknown id through an outage", verb)
		hidden := serveOutage(t, h, job("elsewhere", state.Running), nil, build)
		require.Equal(t, unknown.Code, hidden.Code, "%s of another route's job through an outage: as an unknown id", verb)
		require.Equal(t, unknown.Body.String(), hidden.Body.String(), "%s of another route's job through an outage: as an unknown id", verb)

		ended := job(conformanceRoute, state.Succeeded)
		before := serve(t, h, conformanceRoute, ended, build)
		got := serveOutage(t, h, ended, nil, build)
		require.Equal(t, before.Code, got.Code, "%s of an ended job through an outage: as before it: %s", verb, got.Body)
		require.Equal(t, before.Body.String(), got.Body.String(), "%s of an ended job through an outage: as before it", verb)

		running := job(conformanceRoute, state.Running)
		got = serveOutage(t, h, running, func(j *state.Job) { j.State, j.CompletedAt = state.Succeeded, time.Now().UTC() }, build)
		if verb != h.Poll && !slices.Contains(h.AlsoPoll, verb) {
			require.Equal(t, unknown.Code, got.Code, "%s of a job under way through an outage: the 503: %s", verb, got.Body)
			continue
		}
		before = serve(t, h, conformanceRoute, running, build)
		require.Equal(t, before.Code, got.Code, "%s of a job under way through an outage: as before it: %s", verb, got.Body)
		require.Equal(t, before.Body.String(), got.Body.String(), "%s of a job under way through an outage: as before it, not as it has ended since", verb)
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

// serveOutage is serve on the suite's route through an outage that began
// while j (if not nil) was the job's record; then since, when not nil,
// changes the record, which the face cannot read.
func serveOutage(t *testing.T, h Harness, j *state.Job, since func(*state.Job), build func(string) *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	p := New()
	if j != nil {
		p.Put(j)
	}
	p.Outage(true)
	if since != nil {
		p.Update(j.ID, since)
	}
	f := h.New(face.Mount{Kind: h.Kind, Route: conformanceRoute, Prefix: face.Prefix(h.Kind, conformanceRoute), RecordGrace: 20 * time.Millisecond}, p)
	rec := httptest.NewRecorder()
	f.Handler().ServeHTTP(rec, build(h.ID))
	require.Empty(t, p.Cancels(), "nothing is canceled through an outage")
	return rec
}
