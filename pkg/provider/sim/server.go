package sim

import (
	"container/heap"
	"crypto/subtle"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Server is the simulated provider. Create it with New, serve Handler, and
// run Run to send webhooks. All methods are safe for concurrent use.
type Server struct {
	cfg       Config // defaulted and validated
	seed      int64
	secret    string
	secretKey []byte
	client    *http.Client
	ownClient bool
	log       zerolog.Logger
	now       func() time.Time
	handler   http.Handler
	wake      chan struct{} // nudges Run when an earlier event is queued
	running   atomic.Bool

	mu       sync.Mutex
	preds    map[string]*prediction
	order    []*prediction
	keys     map[string]string // Idempotency-Key → id of its first prediction
	nextSeq  uint64
	faultRNG *mrand.Rand
	// The current throttle episode: every /v1 call before until gets 429.
	throttleFirst time.Time // when its first 429 was answered
	throttleUntil time.Time
	inStatus      int
	inCreates     int
	c             counters
	events        eventHeap
	nextEvent     uint64

	// Limits.Rate's token bucket: the tokens it held at bucketAt.
	bucketTokens float64
	bucketAt     time.Time
	// active holds every prediction that may still be non-terminal; the
	// others are terminal for good. lastChange is the latest moment a
	// prediction was created or canceled at (see moment).
	active     []*prediction
	lastChange time.Time
}

// New validates cfg, fills its defaults and returns a Server. Errors name
// the bad field.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("sim: config: %w", err)
	}
	s := &Server{
		cfg:    cfg,
		seed:   cfg.Seed,
		secret: cfg.WebhookSecret,
		client: cfg.HTTPClient,
		log:    cfg.Logger,
		now:    cfg.Now,
		wake:   make(chan struct{}, 1),
		preds:  make(map[string]*prediction),
		keys:   make(map[string]string),
	}
	s.bucketTokens = cfg.Limits.burst()
	if s.seed == 0 {
		s.seed = time.Now().UnixNano()
	}
	s.faultRNG = mrand.New(mrand.NewPCG(uint64(s.seed), 0x5eed_fa17))
	if s.secret == "" {
		s.secret = newSecret()
	}
	key, err := decodeSecret(s.secret)
	if err != nil {
		return nil, fmt.Errorf("sim: config: webhook_secret: %w", err)
	}
	s.secretKey = key
	if s.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		s.client = &http.Client{
			Transport: tr,
			Timeout:   DefaultWebhookTimeout,
			// Standard Webhooks counts a 3xx as a failed delivery.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		s.ownClient = true
	}
	s.c.keyCreates = make(map[string]int)
	s.handler = s.routes()
	return s, nil
}

// Handler returns the HTTP handler: Replicate's /v1 API and the sim's
// /_sim/ endpoints.
func (s *Server) Handler() http.Handler { return s.handler }

// WebhookSecret returns the "whsec_" secret webhooks are signed with.
func (s *Server) WebhookSecret() string { return s.secret }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/predictions", s.v1(kindCreate, s.handleCreate))
	mux.Handle("POST /v1/models/{owner}/{name}/predictions", s.v1(kindCreate, s.handleCreate))
	mux.Handle("POST /v1/deployments/{owner}/{name}/predictions", s.v1(kindCreate, s.handleCreate))
	mux.Handle("GET /v1/predictions", s.v1(kindList, s.handleList))
	mux.Handle("GET /v1/predictions/{id}", s.v1(kindStatus, s.handleGet))
	mux.Handle("POST /v1/predictions/{id}/cancel", s.v1(kindCancel, s.handleCancel))
	mux.Handle("GET /v1/webhooks/default/secret", s.v1(kindOther, s.handleSecret))
	mux.HandleFunc("GET /files/{id}/output.mp4", s.handleFile)
	mux.HandleFunc("GET /_sim/stats", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Stats())
	})
	mux.HandleFunc("GET /_sim/predictions", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Predictions())
	})
	mux.HandleFunc("POST /_sim/reset-stats", func(w http.ResponseWriter, _ *http.Request) {
		s.ResetStats()
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

type callKind int

const (
	kindOther callKind = iota
	kindCreate
	kindStatus
	kindCancel
	kindList
)

// v1 wraps a /v1 handler: in-flight accounting, Latency, authentication,
// call counting, throttle episodes, Limits.Rate and the other faults, in
// that order (see admit). Limits.Running is the create handler's to apply,
// once it knows whether the create makes a prediction. The handler gets
// the moment the call was admitted.
func (s *Server) v1(kind callKind, h func(http.ResponseWriter, *http.Request, time.Time)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.enter(kind)
		defer s.leave(kind)
		if lat := time.Duration(s.cfg.Latency); lat > 0 {
			t := time.NewTimer(lat)
			select {
			case <-r.Context().Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if !s.authorized(r) {
			s.mu.Lock()
			s.c.unauthorized++
			s.mu.Unlock()
			writeProblem(w, http.StatusUnauthorized, "Unauthenticated", "You did not pass a valid authentication token")
			return
		}
		now := s.now()
		if f := s.admit(kind, r.PathValue("id"), now); f != nil {
			if f.hang > 0 {
				t := time.NewTimer(f.hang)
				select {
				case <-r.Context().Done():
				case <-t.C:
				}
				t.Stop()
			}
			f.write(w)
			return
		}
		h(w, r, now)
	})
}

func (s *Server) enter(kind callKind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch kind {
	case kindStatus:
		s.inStatus++
		s.c.peakStatus = max(s.c.peakStatus, s.inStatus)
	case kindCreate:
		s.inCreates++
		s.c.peakCreates = max(s.c.peakCreates, s.inCreates)
	}
}

func (s *Server) leave(kind callKind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch kind {
	case kindStatus:
		s.inStatus--
	case kindCreate:
		s.inCreates--
	}
}

func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	want := "Bearer " + s.cfg.Token
	got := r.Header.Get("Authorization")
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

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

// Stats returns the counters and a census of the predictions.
func (s *Server) Stats() Stats {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.c
	st := Stats{
		Seed:                  s.seed,
		Predictions:           len(s.order),
		Creates:               c.creates,
		DuplicateCreates:      c.duplicateCreates,
		MaxCreatesPerKey:      c.maxCreatesPerKey,
		IdempotencyKeys:       len(c.keyCreates),
		StatusCalls:           c.statusCalls,
		CancelCalls:           c.cancelCalls,
		ListCalls:             c.listCalls,
		PeakConcurrentStatus:  c.peakStatus,
		PeakConcurrentCreates: c.peakCreates,
		PeakRunning:           c.peakRunning,
		Running:               s.runningAt(now),
		RunningRefused:        c.runningRefused,
		RateRefused:           c.rateRefused,
		Calls:                 c.calls,
		CallsBeforeRetryAfter: c.callsBeforeRetryAfter,
		RateLimited:           c.rateLimited,
		ThrottleEpisodes:      c.throttleEpisodes,
		ServerErrors:          c.serverErrors,
		NotFound:              c.notFound,
		Unauthorized:          c.unauthorized,
		BadRequests:           c.badRequests,
		WebhooksSent:          c.webhooksSent,
		WebhookAttempts:       c.webhookAttempts,
		WebhooksFailed:        c.webhooksFailed,
		WebhooksDuplicated:    c.webhooksDuplicated,
		WebhooksMissing:       c.webhooksMissing,
		WebhooksLate:          c.webhooksLate,
		Hangs:                 c.hangs,
		Malformed:             c.malformed,
		FlapNotFound:          c.flaps,
		Regressed:             c.regressed,
		PredictionsByStatus:   make(map[string]int),
	}
	for _, p := range s.order {
		snap := p.at(now)
		st.PredictionsByStatus[snap.status]++
		if snap.lost {
			st.Lost++
		}
	}
	return st
}

// ResetStats zeroes the counters and each prediction's status call count.
// The peaks start again from what is in flight or running now.
// Predictions, idempotency keys, throttle state and Limits.Rate's bucket
// stay.
func (s *Server) ResetStats() {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c = counters{keyCreates: make(map[string]int)}
	s.c.peakStatus, s.c.peakCreates = s.inStatus, s.inCreates
	s.c.peakRunning = s.runningAt(now)
	for _, p := range s.order {
		p.statusCalls = 0
	}
}

// Predictions returns the ground truth of every prediction, in creation
// order.
func (s *Server) Predictions() []Prediction {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Prediction, 0, len(s.order))
	for _, p := range s.order {
		out = append(out, p.truth(now))
	}
	return out
}

// schedule queues a webhook event and nudges Run. Call with s.mu held.
func (s *Server) schedule(at time.Time, id string, kind eventKind) {
	s.nextEvent++
	heap.Push(&s.events, event{at: at, seq: s.nextEvent, id: id, kind: kind})
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
