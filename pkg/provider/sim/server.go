package sim

import (
	"container/heap"
	"crypto/subtle"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
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
	mux.Handle("GET /v1/predictions/{id}", s.v1(kindStatus, s.handleGet))
	mux.Handle("POST /v1/predictions/{id}/cancel", s.v1(kindCancel, s.handleCancel))
	mux.Handle("GET /v1/webhooks/default/secret", s.v1(kindOther, s.handleSecret))
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
)

// v1 wraps a /v1 handler: in-flight accounting, Latency, authentication,
// call counting and fault injection, in that order. The handler gets the
// moment the call was admitted.
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
}

func (f *fault) write(w http.ResponseWriter) {
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

// admit counts the call and decides whether a fault answers it.
func (s *Server) admit(kind callKind, id string, now time.Time) *fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch kind {
	case kindStatus:
		s.c.statusCalls++
		if p := s.preds[id]; p != nil {
			p.statusCalls++
		}
	case kindCancel:
		s.c.cancelCalls++
	}
	f := s.cfg.Faults
	if now.Before(s.throttleUntil) {
		s.c.rateLimited++
		if !now.Before(s.throttleFirst.Add(time.Duration(f.RetryAfterGrace))) {
			s.c.callsBeforeRetryAfter++
		}
		return &fault{code: http.StatusTooManyRequests, retryAfter: ceilSeconds(s.throttleUntil.Sub(now))}
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
		PeakConcurrentStatus:  c.peakStatus,
		PeakConcurrentCreates: c.peakCreates,
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

// ResetStats zeroes the counters, including peaks and each prediction's
// status call count. Predictions, idempotency keys and throttle state stay.
func (s *Server) ResetStats() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c = counters{keyCreates: make(map[string]int)}
	s.c.peakStatus, s.c.peakCreates = s.inStatus, s.inCreates
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
