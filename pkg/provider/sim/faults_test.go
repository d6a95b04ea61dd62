package sim_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

func TestRateLimitEpisode(t *testing.T) {
	t.Parallel()
	clk := newClock()
	e := setup(t, sim.Config{Now: clk.Now, Default: exact(time.Second, time.Minute)})
	p := e.create(simpleBody)

	sim.SetFaults(e.sim, sim.Faults{RateLimitRate: 1, RetryAfter: dur(2500 * time.Millisecond)})
	// The first call starts the episode.
	resp, b := e.do(http.MethodGet, "/v1/predictions/"+p.ID, "")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "3", resp.Header.Get("Retry-After"))
	require.JSONEq(t, `{"detail":"Request was throttled. Your rate limit resets in ~3s."}`, string(b))

	sim.SetFaults(e.sim, sim.Faults{RetryAfter: dur(2500 * time.Millisecond)}) // no new episodes
	// Within the grace: throttled, not a violation.
	clk.Advance(199 * time.Millisecond)
	resp, _ = e.do(http.MethodPost, "/v1/predictions", simpleBody)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, 0, e.sim.Stats().CallsBeforeRetryAfter)

	// After the grace: every kind of call is throttled and counted.
	clk.Advance(time.Millisecond)
	resp, _ = e.do(http.MethodGet, "/v1/predictions/"+p.ID, "")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "3", resp.Header.Get("Retry-After"))
	clk.Advance(1300 * time.Millisecond) // 1.5 s in: 1 s left
	resp, b = e.do(http.MethodPost, "/v1/predictions/"+p.ID+"/cancel", "")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.Contains(t, string(b), "~1s.")
	clk.Advance(999 * time.Millisecond)
	resp, _ = e.do(http.MethodGet, "/v1/webhooks/default/secret", "")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)

	st := e.sim.Stats()
	require.Equal(t, 5, st.RateLimited)
	require.Equal(t, 1, st.ThrottleEpisodes)
	require.Equal(t, 3, st.CallsBeforeRetryAfter)
	require.Equal(t, 2, st.StatusCalls, "throttled calls still count as status calls")
	require.Equal(t, 1, st.CancelCalls)
	require.Equal(t, 1, st.Creates)

	// Once Retry-After has passed, calls go through.
	clk.Advance(time.Millisecond)
	require.Equal(t, sim.StatusProcessing, e.mustGet(p.ID).Status)
	e.create(simpleBody)
	st = e.sim.Stats()
	require.Equal(t, 5, st.RateLimited)
	require.Equal(t, 3, st.CallsBeforeRetryAfter)
	require.Equal(t, 2, st.Creates)
	require.Equal(t, 3, e.truth(p.ID).StatusCalls)
}

func TestServerErrors(t *testing.T) {
	t.Parallel()
	e := setup(t, sim.Config{Faults: sim.Faults{ServerErrorRate: 1}, Seed: 3})
	codes := map[int]int{}
	for range 30 {
		resp, b := e.do(http.MethodPost, "/v1/predictions", simpleBody)
		require.NotEmpty(t, b)
		codes[resp.StatusCode]++
	}
	for code := range codes {
		require.Contains(t, []int{500, 502, 503}, code)
	}
	require.Len(t, codes, 3, "all three codes appear in 30 draws: %v", codes)
	st := e.sim.Stats()
	require.Equal(t, 30, st.ServerErrors)
	require.Equal(t, 0, st.Creates)
	require.Equal(t, 0, st.Predictions)
}

func TestLost(t *testing.T) {
	t.Parallel()
	clk := newClock()
	e := setup(t, sim.Config{Now: clk.Now, Default: exact(10*time.Second, 100*time.Second),
		Faults: sim.Faults{LostRate: 1}})
	p := e.create(simpleBody)
	require.Equal(t, sim.StatusStarting, e.mustGet(p.ID).Status)
	require.False(t, e.truth(p.ID).Lost)

	clk.Advance(110 * time.Second) // it vanishes before its natural end
	code, _ := e.get(p.ID)
	require.Equal(t, http.StatusNotFound, code)
	code, _ = e.cancel(p.ID)
	require.Equal(t, http.StatusNotFound, code)

	truth := e.truth(p.ID)
	require.True(t, truth.Lost)
	require.Contains(t, []string{sim.StatusStarting, sim.StatusProcessing}, truth.Status)
	require.Nil(t, truth.CompletedAt)
	require.Equal(t, 2, truth.StatusCalls)
	st := e.sim.Stats()
	require.Equal(t, 1, st.Lost)
	require.Equal(t, 2, st.NotFound)
}

// TestConcurrentStats hammers the sim and checks that every counter
// matches what the clients saw.
func TestConcurrentStats(t *testing.T) {
	t.Parallel()
	const workers, gets = 50, 5
	e := setup(t, sim.Config{Default: exact(time.Second, time.Second), TimeScale: 100,
		Faults: sim.Faults{ServerErrorRate: 0.2}, Seed: 11})

	type tally struct {
		created, got, canceled, fiveXX, statusCalls, cancelCalls int
	}
	var (
		mu  sync.Mutex
		sum tally
		ids = map[string]bool{}
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var my tally
			key := fmt.Sprintf("key-%d", w%10) // 10 keys, 5 workers each
			var id string
			for id == "" {
				resp, b := e.do(http.MethodPost, "/v1/predictions", simpleBody, "Idempotency-Key", key)
				switch resp.StatusCode {
				case http.StatusCreated:
					my.created++
					id = decode[wirePred](t, b).ID
				default:
					my.fiveXX++
				}
			}
			for range gets {
				my.statusCalls++
				if code, _ := e.get(id); code == http.StatusOK {
					my.got++
				} else {
					my.fiveXX++
				}
			}
			my.cancelCalls++
			if code, _ := e.cancel(id); code == http.StatusOK {
				my.canceled++
			} else {
				my.fiveXX++
			}
			mu.Lock()
			defer mu.Unlock()
			ids[id] = true
			sum.created += my.created
			sum.got += my.got
			sum.canceled += my.canceled
			sum.fiveXX += my.fiveXX
			sum.statusCalls += my.statusCalls
			sum.cancelCalls += my.cancelCalls
		})
	}
	wg.Wait()

	st := e.sim.Stats()
	require.Equal(t, workers, sum.created)
	require.Equal(t, workers, st.Creates)
	require.Equal(t, workers-10, st.DuplicateCreates)
	require.Equal(t, 10, st.IdempotencyKeys)
	require.Equal(t, 5, st.MaxCreatesPerKey)
	require.Equal(t, 10, st.Predictions)
	require.Len(t, ids, 10)
	require.Equal(t, sum.statusCalls, st.StatusCalls)
	require.Equal(t, sum.cancelCalls, st.CancelCalls)
	require.Equal(t, sum.fiveXX, st.ServerErrors)
	require.Positive(t, st.ServerErrors)
	require.Zero(t, st.NotFound)

	perID := 0
	total := 0
	for _, p := range e.sim.Predictions() {
		perID += p.StatusCalls
		require.True(t, ids[p.ID])
	}
	for _, n := range st.PredictionsByStatus {
		total += n
	}
	require.Equal(t, st.StatusCalls, perID)
	require.Equal(t, 10, total)
}

func TestPeakConcurrency(t *testing.T) {
	t.Parallel()
	e := setup(t, sim.Config{Latency: dur(time.Second), Default: exact(time.Minute, time.Minute)})
	p := e.create(simpleBody)
	require.Equal(t, 1, e.sim.Stats().PeakConcurrentCreates)

	const statuses, creates = 10, 4
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range statuses {
		wg.Go(func() {
			<-start
			e.mustGet(p.ID)
		})
	}
	for range creates {
		wg.Go(func() {
			<-start
			e.create(simpleBody)
		})
	}
	close(start)
	wg.Wait()
	st := e.sim.Stats()
	require.Equal(t, statuses, st.PeakConcurrentStatus)
	require.Equal(t, creates, st.PeakConcurrentCreates)
	require.Equal(t, statuses, st.StatusCalls)
}

// TestStatusCallFaults checks the provider-chaos faults of status calls:
// hangs answered 503 once the client gives up, truncated JSON, a live
// prediction answered 404, and a status shown from earlier in its life.
func TestStatusCallFaults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		f     sim.Faults
		check func(t *testing.T, code int, body []byte, st sim.Stats)
	}{
		{"hang", sim.Faults{HangRate: 1, HangFor: sim.Duration(50 * time.Millisecond)}, func(t *testing.T, code int, _ []byte, st sim.Stats) {
			require.Equal(t, http.StatusServiceUnavailable, code)
			require.Equal(t, 1, st.Hangs)
		}},
		{"malformed", sim.Faults{MalformedRate: 1}, func(t *testing.T, code int, body []byte, st sim.Stats) {
			require.Equal(t, http.StatusOK, code)
			require.False(t, json.Valid(body))
			require.Equal(t, 1, st.Malformed)
		}},
		{"flap", sim.Faults{FlapNotFoundRate: 1}, func(t *testing.T, code int, _ []byte, st sim.Stats) {
			require.Equal(t, http.StatusNotFound, code)
			require.Equal(t, 1, st.FlapNotFound)
			require.Zero(t, st.Lost, "the prediction is not lost")
		}},
		{"regress", sim.Faults{RegressRate: 1}, func(t *testing.T, code int, body []byte, st sim.Stats) {
			require.Equal(t, http.StatusOK, code)
			var p struct{ Status string }
			require.NoError(t, json.Unmarshal(body, &p))
			require.Equal(t, "starting", p.Status, "shown as it was halfway: before it started")
			require.Equal(t, 1, st.Regressed)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A prediction that has just started: halfway through its
			// life so far, it was still starting.
			s, err := sim.New(sim.Config{Seed: 1, Default: sim.Model{QueueMedian: sim.Duration(time.Second), RunMedian: sim.Duration(time.Hour)}})
			require.NoError(t, err)
			srv := httptest.NewServer(s.Handler())
			defer srv.Close()
			resp, err := http.Post(srv.URL+"/v1/models/a/b/predictions", "application/json", strings.NewReader(`{"input":{}}`))
			require.NoError(t, err)
			var created struct{ ID string }
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&created))
			_ = resp.Body.Close()
			require.Eventually(t, func() bool {
				for _, p := range s.Predictions() {
					if p.StartedAt != nil && !p.StartedAt.After(time.Now()) {
						return true
					}
				}
				return false
			}, 10*time.Second, 20*time.Millisecond)

			sim.SetFaults(s, tc.f)
			resp, err = http.Get(srv.URL + "/v1/predictions/" + created.ID)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			tc.check(t, resp.StatusCode, body, s.Stats())
		})
	}
}
