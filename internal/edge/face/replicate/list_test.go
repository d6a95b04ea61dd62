package replicate_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/pkg/state"
)

// The list is the face's predictions on its route (or routed through
// it), newest first, a page at a time; next is an absolute URL on the
// face, which the SDK's paginate() follows as it is.
func TestListPagesTheFacesPredictions(t *testing.T) {
	t.Parallel()
	p, srv := setup(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	n := face.MaxList + 5
	for i := range n {
		j := &state.Job{ID: fmt.Sprintf("p%03d", i), Route: route, State: state.Succeeded, CreatedAt: at.Add(time.Duration(i) * time.Second),
			Metadata: map[string]string{"face": "replicate"}}
		if i == 0 {
			j.Route, j.Routing = "member", &state.Routing{Via: route}
		}
		p.Put(j)
	}
	p.Put(&state.Job{ID: "nats-made", Route: route, State: state.Running, CreatedAt: at.Add(time.Hour)})
	p.Put(&state.Job{ID: "elsewhere", Route: "other", State: state.Running, CreatedAt: at.Add(time.Hour), Metadata: map[string]string{"face": "replicate"}})

	type page struct {
		Previous *string
		Next     *string
		Results  []struct{ ID, Status string }
	}
	var first page
	resp, body := do(t, srv, "GET", "/v1/predictions", "", nil)
	require.Equal(t, 200, resp.StatusCode, body)
	require.NoError(t, json.Unmarshal([]byte(body), &first))
	require.Len(t, first.Results, face.MaxList)
	require.Equal(t, fmt.Sprintf("p%03d", n-1), first.Results[0].ID, "newest first")
	require.Equal(t, "succeeded", first.Results[0].Status)
	require.Nil(t, first.Previous)
	require.NotNil(t, first.Next)
	u, err := url.Parse(*first.Next)
	require.NoError(t, err)
	require.Equal(t, srv.URL, u.Scheme+"://"+u.Host, "next is on the face, as the request reached it")
	require.Equal(t, "/replicate/"+route+"/v1/predictions", u.Path)

	var second page
	resp, body = do(t, srv, "GET", strings.TrimPrefix(*first.Next, srv.URL+"/replicate/"+route), "", nil)
	require.Equal(t, 200, resp.StatusCode, body)
	require.NoError(t, json.Unmarshal([]byte(body), &second))
	require.Nil(t, second.Next, "the last page")
	ids := []string{}
	for _, r := range second.Results {
		ids = append(ids, r.ID)
	}
	require.Equal(t, []string{"p004", "p003", "p002", "p001", "p000"}, ids, "p000 came through the model route")
}

func TestListRefusesAForeignCursor(t *testing.T) {
	t.Parallel()
	_, srv := setup(t)
	resp, body := do(t, srv, "GET", "/v1/predictions?cursor=nope", "", nil)
	require.Equal(t, 400, resp.StatusCode, body)
	require.Contains(t, body, "cursor names no prediction")
	resp, body = do(t, srv, "GET", "/v1/predictions", "", nil)
	require.Equal(t, 200, resp.StatusCode)
	require.JSONEq(t, `{"previous":null,"next":null,"results":[]}`, body)
}
