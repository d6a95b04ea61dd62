package sim

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// The faults and limits a call meets: a throttle episode, the rate and
// running limits, and the faults drawn at random (Config.Faults, Limits).

// fault is an injected answer.
type fault struct {
	code       int
	retryAfter int           // seconds, for 429
	hang       time.Duration // hang this long first (then 503)
	malformed  bool          // 200 with a truncated body
	body       *problem      // the body as is, with no Retry-After
}

func (f *fault) write(w http.ResponseWriter) {
	if f.body != nil {
		writeJSON(w, f.code, f.body)
		return
	}
	if f.malformed {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"id": "trunc`))
		return
	}
	switch f.code {
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", strconv.Itoa(f.retryAfter))
		writeJSON(w, f.code, map[string]string{
			"detail": fmt.Sprintf("Request was throttled. Your rate limit resets in ~%ds.", f.retryAfter),
		})
	case http.StatusBadGateway:
		// What a proxy in front of the API would say: not JSON.
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(f.code)
		_, _ = w.Write([]byte("<html><body><h1>502 Bad Gateway</h1></body></html>\n"))
	case http.StatusServiceUnavailable:
		writeJSON(w, f.code, map[string]string{"detail": "Service Unavailable"})
	case http.StatusNotFound:
		writeNotFound(w)
	default:
		writeJSON(w, f.code, map[string]string{"detail": "Internal Server Error"})
	}
}

// admit counts the call and decides whether a fault answers it: a throttle
// episode under way (which keeps its Retry-After whatever the limits), then
// Limits.Rate, then the faults drawn at random. A call refused by the rate
// limit draws no fault, so it has no effect at all; status and cancel calls
// are counted whatever answers them.
func (s *Server) admit(kind callKind, id string, now time.Time) *fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c.calls++
	switch kind {
	case kindStatus:
		s.c.statusCalls++
		if p := s.preds[id]; p != nil {
			p.statusCalls++
		}
	case kindCancel:
		s.c.cancelCalls++
	case kindList:
		s.c.listCalls++
	}
	f := s.cfg.Faults
	if now.Before(s.throttleUntil) {
		s.c.rateLimited++
		if !now.Before(s.throttleFirst.Add(time.Duration(f.RetryAfterGrace))) {
			s.c.callsBeforeRetryAfter++
		}
		return &fault{code: http.StatusTooManyRequests, retryAfter: ceilSeconds(s.throttleUntil.Sub(now))}
	}
	if s.cfg.Limits.Rate > 0 && !s.takeToken(now) {
		s.c.rateLimited++
		s.c.rateRefused++
		return &fault{code: http.StatusTooManyRequests, body: rateLimitProblem(s.cfg.Limits.Rate)}
	}
	if f.RateLimitRate > 0 && s.faultRNG.Float64() < f.RateLimitRate {
		s.throttleFirst = now
		s.throttleUntil = now.Add(time.Duration(f.RetryAfter))
		s.c.rateLimited++
		s.c.throttleEpisodes++
		return &fault{code: http.StatusTooManyRequests, retryAfter: ceilSeconds(time.Duration(f.RetryAfter))}
	}
	if f.ServerErrorRate > 0 && s.faultRNG.Float64() < f.ServerErrorRate {
		s.c.serverErrors++
		codes := [...]int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable}
		return &fault{code: codes[s.faultRNG.IntN(len(codes))]}
	}
	if kind != kindStatus {
		return nil
	}
	switch {
	case f.HangRate > 0 && s.faultRNG.Float64() < f.HangRate:
		s.c.hangs++
		return &fault{code: http.StatusServiceUnavailable, hang: time.Duration(f.HangFor)}
	case f.MalformedRate > 0 && s.faultRNG.Float64() < f.MalformedRate:
		s.c.malformed++
		return &fault{malformed: true}
	case f.FlapNotFoundRate > 0 && s.faultRNG.Float64() < f.FlapNotFoundRate:
		if p := s.preds[id]; p != nil && !p.lostBy(now) {
			s.c.flaps++
			s.c.notFound++
			return &fault{code: http.StatusNotFound}
		}
	}
	return nil
}

// takeToken refills Limits.Rate's bucket up to now and takes a call's
// token from it, reporting false (and taking nothing) when less than one is
// left. Call with s.mu held.
func (s *Server) takeToken(now time.Time) bool {
	l := s.cfg.Limits
	if d := now.Sub(s.bucketAt); d > 0 {
		s.bucketTokens = min(l.burst(), s.bucketTokens+d.Seconds()*l.Rate)
		s.bucketAt = now
	}
	// The slack absorbs rounding: 1/Rate seconds in whole nanoseconds
	// refill a token that may fall a hair short of 1.
	const slack = 1e-6
	if s.bucketTokens < 1-slack {
		return false
	}
	s.bucketTokens = max(0, s.bucketTokens-1)
	return true
}

// rateLimitProblem is the answer to a call past Limits.Rate. It gives no
// time to wait, in the header or in the body: a client must find the pace
// the account allows by itself.
func rateLimitProblem(rate float64) *problem {
	return &problem{
		Title:  "Too Many Requests",
		Detail: fmt.Sprintf("Request was throttled: the account is limited to %g requests per second.", rate),
		Status: http.StatusTooManyRequests,
	}
}

// runningLimitProblem is the answer to a create past Limits.Running: like
// Runway's and Kling's answer to a concurrency cap, it says the cap is
// reached and gives no time to wait.
func runningLimitProblem(limit int) problem {
	return problem{
		Title: "Concurrency limit reached",
		Detail: fmt.Sprintf("You have reached the limit of %d predictions running at once. "+
			"Wait for one to finish before creating another.", limit),
		Status: http.StatusTooManyRequests,
	}
}

// moment returns the moment a change (a create or a cancel) admitted at now
// takes effect: now, or the latest change's moment if that is later. Racing
// calls read the clock before they take the lock, so without it a change
// could land before one already made, and the running counts of earlier
// creates (PeakRunning, Limits.Running) would no longer hold. Call with
// s.mu held.
func (s *Server) moment(now time.Time) time.Time {
	if now.Before(s.lastChange) {
		now = s.lastChange
	}
	s.lastChange = now
	return now
}

// pruneActive drops from s.active the predictions not running at t and
// returns how many are. A prediction dropped is terminal at t and so at
// every later change, since changes only move forward in time (moment).
// Call with s.mu held and t = moment(...).
func (s *Server) pruneActive(t time.Time) int {
	s.active = slices.DeleteFunc(s.active, func(p *prediction) bool { return !p.runningAt(t) })
	return len(s.active)
}

// runningAt counts the predictions running at t without pruning (t may be
// later than the next change's moment). Call with s.mu held.
func (s *Server) runningAt(t time.Time) int {
	t = later(t, s.lastChange)
	n := 0
	for _, p := range s.active {
		if p.runningAt(t) {
			n++
		}
	}
	return n
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// regress decides whether a status call shows an earlier moment.
func (s *Server) regress() bool {
	f := s.cfg.Faults
	if f.RegressRate > 0 && s.faultRNG.Float64() < f.RegressRate {
		s.c.regressed++
		return true
	}
	return false
}

// ceilSeconds rounds d up to whole seconds, at least 1.
func ceilSeconds(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}
