package openai_test

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/state"
)

// The list is the face's videos on its route, newest first, a page at a
// time after the last id; a job made elsewhere, or on another route, is
// not one of them.
func TestListPagesTheFacesVideos(t *testing.T) {
	t.Parallel()
	r := setup(t)
	for i := range 5 {
		r.p.Put(&state.Job{ID: fmt.Sprintf("video_%02d", i), Route: "sim", State: state.Running,
			CreatedAt: r.now.Add(time.Duration(i) * time.Second), Metadata: map[string]string{"face": "openai", "openai_model": "sora-2"}})
	}
	r.p.Put(&state.Job{ID: "nats-made", Route: "sim", State: state.Running, CreatedAt: r.now.Add(time.Minute)})
	r.p.Put(&state.Job{ID: "video_other", Route: "other", State: state.Running, CreatedAt: r.now.Add(time.Minute), Metadata: map[string]string{"face": "openai"}})

	a := r.do(t, httptest.NewRequest("GET", "/v1/videos?limit=2", nil))
	require.Equal(t, 200, a.status, a.raw)
	require.Equal(t, "list", a.body["object"])
	require.Equal(t, true, a.body["has_more"])
	require.Equal(t, "video_04", a.body["first_id"])
	require.Equal(t, "video_03", a.body["last_id"])
	data := a.body["data"].([]any)
	require.Len(t, data, 2)
	require.Equal(t, "video", data[0].(map[string]any)["object"])
	require.Equal(t, "in_progress", data[0].(map[string]any)["status"])

	a = r.do(t, httptest.NewRequest("GET", "/v1/videos?limit=2&after=video_01", nil))
	require.Equal(t, 200, a.status, a.raw)
	require.Equal(t, false, a.body["has_more"])
	require.Equal(t, "video_00", a.body["first_id"])
	require.Len(t, a.body["data"], 1)

	a = r.do(t, httptest.NewRequest("GET", "/v1/videos", nil))
	require.Len(t, a.body["data"], 5, "the default page holds them all")
	require.Equal(t, false, a.body["has_more"])
}

func TestListRefusesWhatItCannotAnswer(t *testing.T) {
	t.Parallel()
	r := setup(t)
	for _, c := range []struct{ query, param string }{
		{"limit=0", "limit"}, {"limit=101", "limit"}, {"limit=x", "limit"},
		{"order=asc", "order"}, {"after=video_nope", "after"},
	} {
		a := r.do(t, httptest.NewRequest("GET", "/v1/videos?"+c.query, nil))
		require.Equal(t, 400, a.status, c.query)
		e := a.body["error"].(map[string]any)
		require.Equal(t, c.param, e["param"], c.query)
		require.Equal(t, "invalid_request_error", e["type"], c.query)
	}
	a := r.do(t, httptest.NewRequest("GET", "/v1/videos", nil))
	require.Equal(t, 200, a.status)
	require.Equal(t, []any{}, a.body["data"], "an empty list, not null")
	require.Nil(t, a.body["first_id"])
}
