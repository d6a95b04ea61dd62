package sim

import (
	"container/heap"
	"crypto/subtle"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
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

	mu    sync.Mutex
	preds map[string]*prediction
	// inputFiles are the predictions' input files received (inputs.go).
	inputFiles []InputFile
	order      []*prediction
	keys       map[string]string // Idempotency-Key → id of its first prediction
	nextSeq    uint64
	faultRNG   *mrand.Rand
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
	mux.HandleFunc("GET /_sim/inputs", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.InputFiles())
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
