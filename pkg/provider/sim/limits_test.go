package sim_test

import (
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// runningRefusal is the 429 body of a create past Limits.Running.
func runningRefusal(limit int) string {
	return fmt.Sprintf(`{"title":"Concurrency limit reached","detail":"You have reached the limit of %d predictions `+
		`running at once. Wait for one to finish before creating another.","status":429}`, limit)
}

// rateRefusal is the 429 body of a call past Limits.Rate.
func rateRefusal(rate string) string {
	return `{"title":"Too Many Requests","detail":"Request was throttled: the account is limited to ` + rate +
		` requests per second.","status":429}`
}

// refusedCreate requires a create to be refused by Limits.Running: 429
// with no Retry-After.
func (e *env) refusedCreate(limit int, msg string, hdr ...string) {
	e.t.Helper()
	resp, b := e.do(http.MethodPost, "/v1/predictions", simpleBody, hdr...)
	require.Equal(e.t, http.StatusTooManyRequests, resp.StatusCode, "%s: %s", msg, b)
	require.Empty(e.t, resp.Header.Values("Retry-After"), msg)
	require.JSONEq(e.t, runningRefusal(limit), string(b), msg)
}

// at advances clk to epoch+d.
func at(clk *fakeClock, d time.Duration) { clk.Advance(epoch.Add(d).Sub(clk.Now())) }

func TestRunningLimit(t *testing.T) {
	t.Parallel()
	clk := newClock()
	e := setup(t, sim.Config{Now: clk.Now, Default: exact(10*time.Second, 100*time.Second),
		Limits: sim.Limits{Running: 5}})
	// Five predictions a second apart: the first ends first, at 110 s.
	var ids []string
	for i := range 5 {
		at(clk, time.Duration(i)*time.Second)
		ids = append(ids, e.create(simpleBody).ID)
	}
	at(clk, 11*time.Second) // two processing, three starting: all five run
	require.Equal(t, sim.StatusProcessing, e.mustGet(ids[1]).Status)
	require.Equal(t, sim.StatusStarting, e.mustGet(ids[2]).Status)
	e.refusedCreate(5, "while five run")
	st := e.sim.Stats()
	require.Equal(t, 5, st.Creates, "a refused create is not a create")
	require.Equal(t, 5, st.Predictions, "a refused create makes nothing")
	require.Equal(t, 1, st.RunningRefused)
	require.Equal(t, 1, st.RateLimited)
	require.Zero(t, st.RateRefused)
	require.Equal(t, 5, st.Running)
	require.Equal(t, 5, st.PeakRunning)

	// Validation comes first: a bad create is still a 422.
	resp, _ := e.do(http.MethodPost, "/v1/predictions", `{"input":{}}`)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)

	// A cancel frees a slot.
	code, c := e.cancel(ids[4])
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, sim.StatusCanceled, c.Status)
	ids = append(ids, e.create(simpleBody).ID)
	e.refusedCreate(5, "five run again")

	// So does a prediction's end, and not a moment before.
	at(clk, 110*time.Second-time.Nanosecond)
	e.refusedCreate(5, "just before the first ends")
	at(clk, 110*time.Second)
	require.Equal(t, sim.StatusSucceeded, e.mustGet(ids[0]).Status)
	e.create(simpleBody)
	e.refusedCreate(5, "five run once more")

	st = e.sim.Stats()
	require.Equal(t, 7, st.Creates)
	require.Equal(t, 7, st.Predictions)
	require.Equal(t, 4, st.RunningRefused)
	require.Equal(t, 4, st.RateLimited)
	require.Equal(t, 5, st.Running)
	require.Equal(t, 5, st.PeakRunning)
	require.Equal(t, 1, st.BadRequests)

	e.sim.ResetStats()
	st = e.sim.Stats()
	require.Zero(t, st.RunningRefused)
	require.Zero(t, st.RateLimited)
	require.Equal(t, 5, st.PeakRunning, "the peak starts again from what runs")
}

// TestRunningLimitFreedBy checks every way a prediction stops running.
func TestRunningLimitFreedBy(t *testing.T) {
	t.Parallel()
	const queue, run = 10 * time.Second, 100 * time.Second
	tests := []struct {
		name        string
		model       sim.Model
		faults      sim.Faults
		cancelAfter string
		still, free time.Duration // a moment it still runs, one it does not
		cancel      bool          // cancel it at free
	}{
		{name: "succeeded", model: exact(queue, run), still: 110*time.Second - 1, free: 110 * time.Second},
		{name: "failed", model: sim.Model{QueueMedian: dur(queue), RunMedian: dur(run), FailRate: 1},
			still: 110*time.Second - 1, free: 110 * time.Second},
		{name: "canceled while starting", model: exact(queue, run), still: 5 * time.Second, free: 5 * time.Second, cancel: true},
		{name: "never finishes, canceled", model: sim.Model{QueueMedian: dur(queue), RunMedian: dur(run), NeverFinish: 1},
			still: 24 * time.Hour, free: 24 * time.Hour, cancel: true},
		{name: "aborted by Cancel-After", model: exact(queue, run), cancelAfter: "5s",
			still: 5*time.Second - 1, free: 5 * time.Second},
		// It vanishes between 5% and 95% of its 110 s life: from then on
		// it no longer runs, though its frozen status is not terminal.
		{name: "lost", model: exact(queue, run), faults: sim.Faults{LostRate: 1},
			still: 5 * time.Second, free: 105 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			e := setup(t, sim.Config{Now: clk.Now, Default: tt.model, Faults: tt.faults, Limits: sim.Limits{Running: 1}})
			var hdr []string
			if tt.cancelAfter != "" {
				hdr = []string{"Cancel-After", tt.cancelAfter}
			}
			p := e.create(simpleBody, hdr...)
			at(clk, tt.still)
			e.refusedCreate(1, "still running")
			require.Equal(t, 1, e.sim.Stats().Running)
			at(clk, tt.free)
			if tt.cancel {
				code, _ := e.cancel(p.ID)
				require.Equal(t, http.StatusOK, code)
			}
			require.Zero(t, e.sim.Stats().Running)
			e.create(simpleBody)
			st := e.sim.Stats()
			require.Equal(t, 1, st.Running)
			require.Equal(t, 1, st.PeakRunning)
			require.Equal(t, 1, st.RunningRefused)
			require.Equal(t, 2, st.Creates)
		})
	}
}

func TestRunningLimitIdempotency(t *testing.T) {
	t.Parallel()
	t.Run("a repeat is not refused", func(t *testing.T) {
		t.Parallel()
		e := setup(t, sim.Config{Default: exact(time.Hour, time.Hour), Limits: sim.Limits{Running: 1}})
		a := e.create(simpleBody, "Idempotency-Key", "job-1")
		b := e.create(simpleBody, "Idempotency-Key", "job-1")
		require.Equal(t, a.ID, b.ID)
		e.refusedCreate(1, "a new key makes a new prediction", "Idempotency-Key", "job-2")
		e.refusedCreate(1, "no key makes a new prediction")
		st := e.sim.Stats()
		require.Equal(t, 2, st.Creates)
		require.Equal(t, 1, st.DuplicateCreates)
		require.Equal(t, 1, st.IdempotencyKeys, "a refused create's key is not counted")
		require.Equal(t, 2, st.RunningRefused)
		require.Equal(t, 1, st.Predictions)
		require.Equal(t, 1, st.PeakRunning)

		// The refused key was not taken: once there is room it makes a
		// prediction of its own.
		code, _ := e.cancel(a.ID)
		require.Equal(t, http.StatusOK, code)
		c := e.create(simpleBody, "Idempotency-Key", "job-2")
		require.NotEqual(t, a.ID, c.ID)
		require.Equal(t, "job-2", e.truth(c.ID).IdempotencyKey)
	})
	t.Run("NotIdempotent repeats are new predictions", func(t *testing.T) {
		t.Parallel()
		e := setup(t, sim.Config{Default: exact(time.Hour, time.Hour), Limits: sim.Limits{Running: 1},
			Faults: sim.Faults{NotIdempotent: true}})
		e.create(simpleBody, "Idempotency-Key", "job-1")
		e.refusedCreate(1, "a repeat makes a new prediction", "Idempotency-Key", "job-1")
		st := e.sim.Stats()
		require.Equal(t, 1, st.Creates)
		require.Zero(t, st.DuplicateCreates, "a refused create is not a duplicate create")
		require.Equal(t, 1, st.MaxCreatesPerKey)
		require.Equal(t, 1, st.Predictions)
	})
}

// TestPeakRunning follows overlapping predictions that end, are canceled
// and vanish, and checks the peak and the count at every step.
func TestPeakRunning(t *testing.T) {
	t.Parallel()
	clk := newClock()
	// Each prediction runs 110 s from its create.
	e := setup(t, sim.Config{Now: clk.Now, Default: exact(10*time.Second, 100*time.Second)})
	check := func(running, peak int, msg string) {
		t.Helper()
		st := e.sim.Stats()
		require.Equal(t, running, st.Running, "running: %s", msg)
		require.Equal(t, peak, st.PeakRunning, "peak: %s", msg)
	}
	check(0, 0, "none yet")
	e.create(simpleBody)      // A: 0..110 s
	b := e.create(simpleBody) // B: 0..50 s (canceled)
	check(2, 2, "A and B")
	at(clk, 50*time.Second)
	code, _ := e.cancel(b.ID)
	require.Equal(t, http.StatusOK, code)
	check(1, 2, "B canceled")
	at(clk, 60*time.Second)
	e.create(simpleBody) // C: 60..170 s
	check(2, 2, "A and C: B's cancel ended it")
	at(clk, 115*time.Second)
	e.create(simpleBody) // D: 115..225 s
	check(2, 2, "C and D: A ended at 110 s")

	sim.SetFaults(e.sim, sim.Faults{LostRate: 1})
	at(clk, 116*time.Second)
	e.create(simpleBody) // E: vanishes between 121.5 and 220.5 s
	sim.SetFaults(e.sim, sim.Faults{})
	check(3, 3, "C, D and E")

	at(clk, 221*time.Second)
	e.create(simpleBody) // F: 221..331 s
	at(clk, 222*time.Second)
	e.create(simpleBody) // G: 222..332 s
	at(clk, 223*time.Second)
	h := e.create(simpleBody) // H: 223..333 s
	check(4, 4, "D, F, G and H: E vanished, C ended")
	require.Equal(t, 1, e.sim.Stats().Lost)
	require.Equal(t, sim.StatusStarting, e.mustGet(h.ID).Status)

	// A reset starts the peak from what runs now.
	e.sim.ResetStats()
	check(4, 4, "reset while four run")
	at(clk, 300*time.Second)
	check(3, 4, "D ended at 225 s")
	e.sim.ResetStats()
	check(3, 3, "reset while three run")

	// Ended predictions are dropped from the running set at a create.
	at(clk, 340*time.Second)
	check(0, 3, "all ended")
	require.Equal(t, 4, sim.ActivePredictions(e.sim), "D, F, G and H: nothing prunes before a create")
	e.create(simpleBody)
	check(1, 3, "one more")
	require.Equal(t, 1, sim.ActivePredictions(e.sim))
	require.Equal(t, 9, e.sim.Stats().Predictions)
}

// TestPeakRunningOutOfOrderClock: racing calls read the clock before they
// take the lock, so a create or cancel may come with a moment earlier than
// one already made. It then takes effect at the latest moment, so that the
// running counts already taken still hold.
func TestPeakRunningOutOfOrderClock(t *testing.T) {
	t.Parallel()
	clk := newClock()
	e := setup(t, sim.Config{Now: clk.Now, Default: exact(10*time.Second, 100*time.Second)})
	e.create(simpleBody) // A: 0..110 s
	at(clk, 115*time.Second)
	b := e.create(simpleBody) // B: from 115 s; A is dropped, ended
	at(clk, 105*time.Second)  // a create that read the clock earlier
	c := e.create(simpleBody)
	require.Equal(t, b.CreatedAt, c.CreatedAt, "C is made after B, not before")
	require.Equal(t, epoch.Add(115*time.Second), e.truth(c.ID).CreatedAt)
	st := e.sim.Stats()
	require.Equal(t, 2, st.Running)
	require.Equal(t, 2, st.PeakRunning, "B and C at 115 s; A had ended")

	at(clk, 100*time.Second) // a cancel that read the clock earlier still
	code, w := e.cancel(c.ID)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, sim.StatusCanceled, w.Status)
	require.Equal(t, epoch.Add(115*time.Second), parseTime(t, w.CompletedAt), "canceled after it was made")
	require.Equal(t, 1, e.sim.Stats().Running)
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rate  float64
		text  string // the rate as the body writes it
		burst int
	}{
		{0.5, "0.5", 1},
		{2, "2", 2},
		{2.5, "2.5", 3},
		{3, "3", 3}, // 1/3 s is not a whole number of nanoseconds
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			t.Parallel()
			interval := time.Duration(float64(time.Second) / tt.rate)
			clk := newClock()
			e := setup(t, sim.Config{Now: clk.Now, Limits: sim.Limits{Rate: tt.rate}})
			refused := func(method, path, body, msg string) {
				t.Helper()
				resp, b := e.do(method, path, body)
				require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "%s: %s", msg, b)
				require.Empty(t, resp.Header.Values("Retry-After"), msg)
				require.JSONEq(t, rateRefusal(tt.text), string(b), msg)
			}
			statusCalls := 0
			get := func(id string) {
				t.Helper()
				statusCalls++
				e.mustGet(id)
			}
			refusedGet := func(id, msg string) {
				t.Helper()
				statusCalls++
				refused(http.MethodGet, "/v1/predictions/"+id, "", msg)
			}

			// The burst: the create and burst-1 status calls.
			p := e.create(simpleBody)
			for range tt.burst - 1 {
				get(p.ID)
			}
			refusedGet(p.ID, "past the burst")
			refused(http.MethodPost, "/v1/predictions/"+p.ID+"/cancel", "", "a cancel past the burst")
			require.Equal(t, sim.StatusStarting, e.truth(p.ID).Status, "the refused cancel had no effect")
			refused(http.MethodPost, "/v1/predictions", simpleBody, "a create past the burst")
			require.Equal(t, 1, e.sim.Stats().Predictions, "the refused create made nothing")

			// One call per 1/Rate.
			clk.Advance(interval - time.Millisecond)
			refusedGet(p.ID, "just before 1/Rate")
			clk.Advance(time.Millisecond)
			get(p.ID)
			refusedGet(p.ID, "right after the refill")

			// A long pause refills the burst, no more.
			clk.Advance(100 * interval)
			for range tt.burst {
				get(p.ID)
			}
			refusedGet(p.ID, "past the refilled burst")

			st := e.sim.Stats()
			require.Equal(t, 6, st.RateRefused)
			require.Equal(t, 6, st.RateLimited)
			require.Equal(t, 1, st.Creates, "a refused create is not a create")
			require.Equal(t, statusCalls, st.StatusCalls, "refused status calls are status calls")
			require.Equal(t, 1, st.CancelCalls)
			require.Zero(t, st.RunningRefused)
			require.Zero(t, st.ThrottleEpisodes)

			// A reset zeroes the count but leaves the bucket empty.
			e.sim.ResetStats()
			refusedGet(p.ID, "after a reset")
			require.Equal(t, 1, e.sim.Stats().RateRefused)
		})
	}
}

// TestRateLimitCountsAccountCalls: the bucket is the account's, so a call
// that fails authentication takes no token, and the secret call takes one.
func TestRateLimitCountsAccountCalls(t *testing.T) {
	t.Parallel()
	clk := newClock()
	e := setup(t, sim.Config{Now: clk.Now, Token: "tok", Limits: sim.Limits{Rate: 1}})
	resp, _ := e.do(http.MethodGet, "/v1/webhooks/default/secret", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = e.do(http.MethodGet, "/v1/webhooks/default/secret", "", "Authorization", "Bearer tok")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, b := e.do(http.MethodPost, "/v1/predictions", simpleBody, "Authorization", "Bearer tok")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Empty(t, resp.Header.Values("Retry-After"))
	require.JSONEq(t, rateRefusal("1"), string(b))
	st := e.sim.Stats()
	require.Equal(t, 1, st.Unauthorized)
	require.Equal(t, 1, st.RateRefused)
	require.Zero(t, st.Creates)
}

// TestRateLimitAndThrottleEpisodes: a throttle episode keeps its
// Retry-After whatever the bucket holds, and its 429s take no token.
func TestRateLimitAndThrottleEpisodes(t *testing.T) {
	t.Parallel()
	clk := newClock()
	e := setup(t, sim.Config{Now: clk.Now, Limits: sim.Limits{Rate: 1}})
	const path = "/v1/webhooks/default/secret"

	sim.SetFaults(e.sim, sim.Faults{RateLimitRate: 1})
	resp, _ := e.do(http.MethodGet, path, "") // takes the token, starts an episode
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	sim.SetFaults(e.sim, sim.Faults{})
	resp, b := e.do(http.MethodGet, path, "") // the bucket is empty, but the episode answers
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.Contains(t, string(b), "resets in ~1s")
	st := e.sim.Stats()
	require.Equal(t, 1, st.ThrottleEpisodes)
	require.Equal(t, 2, st.RateLimited)
	require.Zero(t, st.RateRefused)

	clk.Advance(time.Second) // the episode is over; the bucket holds one token
	resp, _ = e.do(http.MethodGet, path, "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = e.do(http.MethodGet, path, "")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Empty(t, resp.Header.Values("Retry-After"))
	st = e.sim.Stats()
	require.Equal(t, 3, st.RateLimited)
	require.Equal(t, 1, st.RateRefused)
}

func TestLimitsValidate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		field string
		l     sim.Limits
	}{
		{"limits.running", sim.Limits{Running: -1}},
		{"limits.rate", sim.Limits{Rate: -0.5}},
		{"limits.rate", sim.Limits{Rate: math.NaN()}},
		{"limits.rate", sim.Limits{Rate: math.Inf(1)}},
	} {
		_, err := sim.New(sim.Config{Limits: tt.l})
		require.Error(t, err, tt.field)
		require.Contains(t, err.Error(), tt.field)
	}
	_, err := sim.New(sim.Config{Limits: sim.Limits{Running: 3, Rate: 0.25}})
	require.NoError(t, err)
}
