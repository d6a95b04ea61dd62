package replicate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/providertest"
	"github.com/pollux-dev/pollux/pkg/provider/replicate"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// hook is the per-job webhook URL the job in doubt was sent with.
const hook = "https://hooks.example.com/webhooks/r?job=j1"

var attempt = time.Date(2026, 9, 8, 16, 19, 30, 0, time.UTC)

func findReq() provider.SubmitRequest {
	return provider.SubmitRequest{JobID: "j1", WebhookURL: hook, AttemptedAt: attempt, AttemptEnded: attempt.Add(30 * time.Second)}
}

// listed is a prediction as the sim's list shows it (with its webhook).
func listed(id, status, webhook string, created time.Time) map[string]any {
	return map[string]any{"id": id, "status": status, "webhook": webhook, "created_at": created.Format(time.RFC3339Nano),
		"input": map[string]any{}, "urls": map[string]string{"get": "/v1/predictions/" + id}}
}

// listFake serves pages of predictions, newest first, recording the
// queries it was asked.
type listFake struct {
	*providertest.Server
	mu      sync.Mutex
	queries []url.Values
}

func newListFake(t *testing.T, pages func(f *listFake, q url.Values) (int, any)) *listFake {
	lf := &listFake{}
	lf.Server = newFake(t, func(r *http.Request) (int, http.Header, []byte) {
		lf.mu.Lock()
		lf.queries = append(lf.queries, r.URL.Query())
		lf.mu.Unlock()
		if r.URL.Path != "/v1/predictions" || r.Method != http.MethodGet {
			return http.StatusNotFound, nil, []byte(`{"detail":"Not found."}`)
		}
		code, body := pages(lf, r.URL.Query())
		if b, ok := body.([]byte); ok {
			return code, nil, b
		}
		b, _ := json.Marshal(body)
		return code, nil, b
	})
	return lf
}

func finding(t *testing.T, base string) provider.Finder {
	t.Helper()
	a, err := replicate.New(provider.Config{Route: "r", Kind: replicate.Kind, BaseURL: base, Token: "r8_test",
		Options: json.RawMessage(`{"find_by_webhook": true}`)})
	require.NoError(t, err)
	f, ok := a.(provider.Finder)
	require.True(t, ok, "find_by_webhook makes the adapter a Finder")
	return f
}

// Without find_by_webhook the adapter is no Finder: Replicate's own list
// shows nothing Pollux sent that names a job.
func TestFinderOnlyWhenTheListShowsWebhooks(t *testing.T) {
	t.Parallel()
	a, err := replicate.New(provider.Config{Route: "r", Kind: replicate.Kind, Token: "r8_test"})
	require.NoError(t, err)
	_, ok := a.(provider.Finder)
	require.False(t, ok)
	a, err = replicate.New(provider.Config{Route: "r", Kind: replicate.Kind, Token: "r8_test", Options: json.RawMessage(`{"find_by_webhook": true}`)})
	require.NoError(t, err)
	_, ok = a.(provider.Webhooks)
	require.True(t, ok, "a finding adapter still verifies webhooks")
}

func TestFindFoundOnALaterPage(t *testing.T) {
	t.Parallel()
	lf := newListFake(t, func(lf *listFake, q url.Values) (int, any) {
		if q.Get("cursor") == "" {
			next := lf.URL + "/v1/predictions?cursor=2"
			return 200, map[string]any{"next": next, "results": []any{
				listed("other", "processing", hook+"0", attempt.Add(5*time.Second)), // another job's URL, a prefix of ours
				listed("nohook", "processing", "", attempt.Add(4*time.Second)),
			}}
		}
		return 200, map[string]any{"next": nil, "results": []any{
			listed("mine", "succeeded", hook, attempt.Add(time.Second)),
			listed("old", "succeeded", hook, attempt.Add(-time.Hour)), // before the window: not read
		}}
	})
	st, found, err := finding(t, lf.URL).Find(context.Background(), findReq())
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "mine", st.RemoteID)
	require.Equal(t, state.Succeeded, st.State)
	lf.mu.Lock()
	defer lf.mu.Unlock()
	require.Len(t, lf.queries, 2)
	// The window is the attempt's, widened by the clocks' skew.
	require.Equal(t, attempt.Add(-replicate.FindSkew).Format(time.RFC3339Nano), lf.queries[0].Get("created_after"))
	require.Equal(t, attempt.Add(30*time.Second+replicate.FindSkew).Format(time.RFC3339Nano), lf.queries[0].Get("created_before"))
	require.Equal(t, "Bearer r8_test", lf.Last().Header.Get("Authorization"))
}

func TestFindNotFound(t *testing.T) {
	t.Parallel()
	for name, results := range map[string][]any{
		"empty window": {},
		"other jobs": {
			listed("a", "processing", hook+"0", attempt.Add(2*time.Second)),
			listed("b", "starting", "", attempt.Add(time.Second)),
		},
		"only older": {listed("old", "succeeded", hook, attempt.Add(-replicate.FindSkew-time.Second))},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			lf := newListFake(t, func(lf *listFake, q url.Values) (int, any) {
				if q.Get("cursor") != "" {
					return 200, map[string]any{"results": []any{listed("older", "succeeded", hook, attempt.Add(-time.Hour))}}
				}
				var next any
				if name == "only older" {
					next = lf.URL + "/v1/predictions?cursor=2" // a provider that ignores created_after
				}
				return 200, map[string]any{"next": next, "results": results}
			})
			_, found, err := finding(t, lf.URL).Find(context.Background(), findReq())
			require.NoError(t, err)
			require.False(t, found)
			lf.mu.Lock()
			defer lf.mu.Unlock()
			require.Len(t, lf.queries, 1, "newest first: a page that reaches before the window is the last read")
		})
	}
}

func TestFindCannotTell(t *testing.T) {
	t.Parallel()
	documented := fixture(t, "list.json") // Replicate's own list: no webhook field
	var sample struct {
		Results []map[string]any `json:"results"`
	}
	require.NoError(t, json.Unmarshal(documented, &sample))
	sample.Results[0]["created_at"] = attempt.Add(time.Second).Format(time.RFC3339Nano)
	for name, c := range map[string]struct {
		req   func() provider.SubmitRequest
		pages func(lf *listFake, q url.Values) (int, any)
		says  string
	}{
		"two predictions carry the job's URL": {findReq, func(*listFake, url.Values) (int, any) {
			return 200, map[string]any{"results": []any{listed("a", "processing", hook, attempt.Add(2*time.Second)), listed("b", "processing", hook, attempt.Add(time.Second))}}
		}, "two predictions"},
		"a list that shows no webhooks": {findReq, func(*listFake, url.Values) (int, any) {
			return 200, map[string]any{"results": sample.Results}
		}, "shows no webhook URLs"},
		"more pages than are read": {findReq, func(lf *listFake, q url.Values) (int, any) {
			n := len(q.Get("cursor")) + 1
			return 200, map[string]any{"next": lf.URL + "/v1/predictions?cursor=" + q.Get("cursor") + "x",
				"results": []any{listed(fmt.Sprintf("p%d", n), "processing", hook+"0", attempt.Add(time.Second))}}
		}, "more than"},
		"a job sent without a webhook": {func() provider.SubmitRequest {
			r := findReq()
			r.WebhookURL = ""
			return r
		}, nil, "without a webhook URL"},
		"no attempt window": {func() provider.SubmitRequest {
			r := findReq()
			r.AttemptedAt = time.Time{}
			return r
		}, nil, "no attempt window"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pages := c.pages
			if pages == nil {
				pages = func(*listFake, url.Values) (int, any) { return 500, map[string]string{"detail": "asked"} }
			}
			lf := newListFake(t, pages)
			_, found, err := finding(t, lf.URL).Find(context.Background(), c.req())
			require.ErrorIs(t, err, provider.ErrCannotTell)
			require.ErrorContains(t, err, c.says)
			require.False(t, found)
			lf.mu.Lock()
			defer lf.mu.Unlock()
			require.LessOrEqual(t, len(lf.queries), 10, "at most ten pages (a thousand predictions) are read")
		})
	}
}

func TestFindErrorsAreClassified(t *testing.T) {
	t.Parallel()
	throttled, unauthenticated := fixture(t, "throttled.json"), fixture(t, "unauthenticated.json")
	// The token goes with every call: a next page elsewhere is not asked.
	elsewhere := newFake(t, func(*http.Request) (int, http.Header, []byte) { return 200, nil, []byte(`{"results":[]}`) })
	t.Cleanup(func() {
		require.Empty(t, elsewhere.Requests(), "a next page on another origin was asked")
	})
	for name, c := range map[string]struct {
		pages func(lf *listFake, q url.Values) (int, any)
		class provider.Class
	}{
		"throttled": {func(*listFake, url.Values) (int, any) {
			return 429, throttled
		}, provider.RateLimited},
		"unauthenticated": {func(*listFake, url.Values) (int, any) {
			return 401, unauthenticated
		}, provider.Auth},
		"server error": {func(*listFake, url.Values) (int, any) { return 503, []byte(`{"detail":"Service Unavailable"}`) }, provider.Transient},
		"garbage":      {func(*listFake, url.Values) (int, any) { return 200, []byte(`{"results": [`) }, provider.Transient},
		"next page on another host": {func(*listFake, url.Values) (int, any) {
			return 200, map[string]any{"next": elsewhere.URL + "/v1/predictions?cursor=2", "results": []any{}}
		}, provider.Transient},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			lf := newListFake(t, c.pages)
			_, found, err := finding(t, lf.URL).Find(context.Background(), findReq())
			require.Error(t, err)
			require.False(t, errors.Is(err, provider.ErrCannotTell), "a failed call is retried, not taken for an answer")
			require.Equal(t, c.class, provider.ClassOf(err))
			require.False(t, found)
		})
	}
}

// Against the simulated provider, whose list shows webhook URLs: the
// prediction a create made is found by its job's URL, one never made is
// not.
func TestFindAtTheSimulatedProvider(t *testing.T) {
	t.Parallel()
	s, err := sim.New(sim.Config{})
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	f := finding(t, srv.URL)
	a := f.(provider.Adapter)
	start := time.Now()
	req := provider.SubmitRequest{JobID: "j1", Model: "acme/video", Input: json.RawMessage(`{"prompt":"a"}`), WebhookURL: hook}
	for _, other := range []string{hook + "0", ""} { // other jobs, made around it
		r := req
		r.WebhookURL = other
		_, err := a.Submit(context.Background(), r)
		require.NoError(t, err)
	}
	made, err := a.Submit(context.Background(), req)
	require.NoError(t, err)

	req.AttemptedAt, req.AttemptEnded = start, time.Now()
	st, found, err := f.Find(context.Background(), req)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, made.RemoteID, st.RemoteID)

	req.WebhookURL = "https://hooks.example.com/webhooks/r?job=never"
	_, found, err = f.Find(context.Background(), req)
	require.NoError(t, err)
	require.False(t, found)
}
