package frontdoor_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/pkg/events"
)

// A face in a package of its own cannot import the front door (which
// imports every face): the front door's errors reach it as *face.Error.
func TestAFaceReadsTheFrontDoorsErrors(t *testing.T) {
	t.Parallel()
	build := func(m face.Mount, p face.Pollux) face.Face {
		f := &probeFace{m: m, p: p}
		mux := http.NewServeMux()
		mux.HandleFunc("POST /bad", func(w http.ResponseWriter, r *http.Request) {
			err := p.Submit(r.Context(), r, m.Route, events.Submit{V: events.Version, ID: "bad-1", Input: json.RawMessage(`{}`)})
			var e *face.Error
			require.ErrorAs(t, err, &e)
			f.WriteError(w, e)
		})
		return handlerFace{f, mux}
	}
	d := setupWith(t, frontdoor.Config{Faces: []face.Mount{{Kind: face.OpenAI, Route: route}}, FaceBuilders: map[face.Kind]face.New{face.OpenAI: build}}, withIndex)
	r := d.do(t, http.MethodPost, "/openai/sim/bad", "", nil)
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.raw)
	require.Equal(t, "invalid_field", r.body["probe_error"])
	require.Equal(t, "model", r.body["field"])
}

// handlerFace is a probe face with a handler of the test's.
type handlerFace struct {
	*probeFace
	h http.Handler
}

func (f handlerFace) Handler() http.Handler { return f.h }
