package frontdoor

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Quotas: a token of the tokens file with rate=N may make N requests a
// second, in bursts of up to 2N; beyond that a request is answered 429
// too_many_requests with Retry-After — an app that polls too hard is held
// to its own quota, whatever it asks for. The limit is this process's:
// a fleet of front doors behind a balancer grants each token N a second
// per process.

// quotas holds a rate limiter per token with a quota, kept across reloads
// of the tokens file while the token's rate stays the same.
type quotas struct {
	mu sync.Mutex
	by map[[32]byte]*rate.Limiter
}

// of returns t's limiter, nil when t has no quota.
func (q *quotas) of(t token) *rate.Limiter {
	if t.rate <= 0 {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.by == nil {
		q.by = map[[32]byte]*rate.Limiter{}
	}
	l := q.by[t.sum]
	if l == nil || l.Limit() != rate.Limit(t.rate) {
		l = rate.NewLimiter(rate.Limit(t.rate), max(1, int(math.Ceil(2*t.rate))))
		q.by[t.sum] = l
	}
	return l
}

// overQuota takes one request from p's quota, or returns the 429 that
// says when to come back.
func overQuota(p principal) *apiError {
	if p.quota == nil {
		return nil
	}
	now := time.Now()
	res := p.quota.ReserveN(now, 1)
	if !res.OK() {
		return tooMany(time.Second)
	}
	wait := res.DelayFrom(now)
	if wait == 0 {
		return nil
	}
	res.CancelAt(now) // refused: it takes nothing
	return tooMany(wait)
}

func tooMany(wait time.Duration) *apiError {
	secs := int(math.Ceil(wait.Seconds()))
	e := fail(http.StatusTooManyRequests, CodeTooManyRequests, "", "this token's quota (rate= in the tokens file) is spent; retry after "+strconv.Itoa(secs)+"s")
	e.header = http.Header{}
	e.header.Set("Retry-After", strconv.Itoa(secs))
	e.retryAfter = wait
	return e
}
