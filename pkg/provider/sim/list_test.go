package sim_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

type listPage struct {
	Next     *string    `json:"next"`
	Previous *string    `json:"previous"`
	Results  []wirePred `json:"results"`
}

// The list is Replicate's: newest first, ListPageSize a page, "next" the
// following page's URL, created_after and created_before honoured; each
// prediction carries its webhook URL, "" for none.
func TestListPredictions(t *testing.T) {
	t.Parallel()
	clock := newClock()
	e := setup(t, sim.Config{Now: clock.Now, Faults: sim.Faults{LostRate: 0}})
	const n = sim.ListPageSize + 20
	ids := make([]string, n)
	for i := range n {
		hook := ""
		if i%2 == 0 {
			hook = fmt.Sprintf(`, "webhook": "https://hooks.example.com/w?job=j%d"`, i)
		}
		ids[i] = e.create(fmt.Sprintf(`{"version": "v", "input": {"i": %d}%s}`, i, hook)).ID
		clock.Advance(time.Second)
	}
	var got []wirePred
	path := "/v1/predictions"
	pages := 0
	for {
		resp, b := e.do(http.MethodGet, path, "")
		require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", b)
		require.Contains(t, string(b), `"webhook":""`, "a prediction without a webhook says so")
		p := decode[listPage](t, b)
		got = append(got, p.Results...)
		pages++
		if p.Next == nil {
			break
		}
		require.True(t, strings.HasPrefix(*p.Next, e.url+"/v1/predictions?"), "next is the API's own URL: %s", *p.Next)
		path = strings.TrimPrefix(*p.Next, e.url)
	}
	require.Equal(t, 2, pages)
	require.Len(t, got, n)
	for i, p := range got {
		require.Equal(t, ids[n-1-i], p.ID, "newest first")
	}
	require.Equal(t, "https://hooks.example.com/w?job=j118", got[1].Webhook)

	// The window: created at or after created_after, before created_before.
	after := epoch.Add(10 * time.Second).Format(time.RFC3339Nano)
	before := epoch.Add(13 * time.Second).Format(time.RFC3339Nano)
	resp, b := e.do(http.MethodGet, "/v1/predictions?created_after="+url.QueryEscape(after)+"&created_before="+url.QueryEscape(before), "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := decode[listPage](t, b)
	require.Nil(t, p.Next)
	require.Equal(t, []string{ids[12], ids[11], ids[10]}, []string{p.Results[0].ID, p.Results[1].ID, p.Results[2].ID})
	require.Len(t, p.Results, 3)

	for _, bad := range []string{"created_after=yesterday", "cursor=abc"} {
		resp, b := e.do(http.MethodGet, "/v1/predictions?"+bad, "")
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", bad, b)
	}
	require.Equal(t, 5, e.sim.Stats().ListCalls)
}
