// Package webhook is cmd/webhook's service: an HTTP receiver that verifies
// each provider delivery before reading it, reads it (a verified delivery
// that cannot be read, or names no job, is answered 400 with the problem
// body of package problem), publishes it to JetStream with the provider's
// delivery id as Nats-Msg-Id and answers 2xx only after the PubAck (503
// with Retry-After when NATS cannot take it, never 410); and a consumer
// that hands the stored deliveries to the jobs' owner (package jobs),
// which applies them and stops a job's polling at once when one makes it
// terminal.
//
// No genuine delivery is dropped for arriving early: one about a job whose
// record does not know its remote id yet (a provider may call back before
// it answers the create), or that is not armed yet, is kept and retried
// until it applies or its route's hold window passes (Config.Hold: at
// least the route's call timeout plus 30 s); only then is it dropped,
// logged and counted.
//
// With tracing on (package tracing), a delivery's receipt is a span (a
// trace of its own), and its application a span of the job's trace,
// linked to the receipt (trace.go).
package webhook

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/core/consume"
	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/httpserve"
	"github.com/pollux-dev/pollux/internal/platform/problem"
	"github.com/pollux-dev/pollux/internal/platform/tracing"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// startupTimeout bounds the JetStream calls made before the service runs.
const startupTimeout = 30 * time.Second

// Headers Pollux adds to a stored delivery.
const (
	HeaderJob        = "Pollux-Job"
	HeaderDelivery   = "Pollux-Delivery-Id"
	HeaderReceivedAt = "Pollux-Received-At"
	// HeaderCallback marks an unsigned callback, and HeaderRemoteID names
	// the remote job it is about.
	HeaderCallback = "Pollux-Callback"
	HeaderRemoteID = "Pollux-Remote-Id"
)

// Metrics observe the service; nil fields are ignored. They must not block.
type Metrics struct {
	// Received observes a delivery by route and HTTP status answered.
	Received func(route string, status int, d time.Duration)
	// Applied observes a stored delivery applied to a job, by route and
	// whether it changed the job.
	Applied func(route string, changed bool)
	// Hinted observes a hint that brought a job's check forward, by
	// route: an unsigned callback, or a delivery that names the job but
	// not its state (an id-only event, or one its adapter could not
	// verify).
	Hinted func(route string)
	// Dropped observes a stored delivery that was never applied, by route
	// and reason ("mismatch": about another job than its URL names;
	// "unknown_job": no job took it within the hold window; "unreadable").
	Dropped func(route, reason string)
	// Orphans counts stored deliveries removed although acknowledged
	// (consume.SweepOrphans).
	Orphans func(n int)
}

// Config configures the service. Zero values mean the defaults on each field.
type Config struct {
	// Routes are the routes whose deliveries this process accepts.
	Routes map[string]*route.Route
	// Options size the streams (see events.Options).
	Options events.Options
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout bound
	// each connection (defaults 5s, 15s, 15s, 60s).
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes caps request headers (default 16 KiB).
	MaxHeaderBytes int
	// PublishTimeout bounds a delivery's whole wait on NATS: the lookup
	// of its delivery id, the publish until its PubAck and the recording
	// of the id (default 5s). A delivery NATS cannot take within it is
	// answered 503, however long the JetStream context's own API timeout.
	PublishTimeout time.Duration
	// Workers apply deliveries concurrently (default 8).
	Workers int
	// Hold is how long a delivery that cannot be applied yet is kept and
	// retried (default 2m), and at least the route's provider call timeout
	// (30s when the route sets none) plus 30s: a create's answer is
	// recorded within its call.
	Hold time.Duration
	// Sweep is how often the consumer's orphans are looked for (default
	// consume.DefaultSweep).
	Sweep time.Duration
	// Logger receives the service's log lines (default: none).
	Logger zerolog.Logger
	// Metrics observe the service.
	Metrics Metrics
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Service receives and applies webhooks.
type Service struct {
	cfg  Config
	js   jetstream.JetStream
	res  *events.Resources
	jobs jobs.Webhooks
	ns   events.Namespace
	log  zerolog.Logger
	rnd  *rand.Rand
}

// New validates the configuration and prepares the service.
func New(cfg Config, js jetstream.JetStream, ns events.Namespace, res *events.Resources, owner jobs.Webhooks) (*Service, error) {
	if len(cfg.Routes) == 0 {
		return nil, errors.New("webhook: Routes: at least one route is required")
	}
	cfg.ReadHeaderTimeout = cmp.Or(cfg.ReadHeaderTimeout, 5*time.Second)
	cfg.ReadTimeout = cmp.Or(cfg.ReadTimeout, 15*time.Second)
	cfg.WriteTimeout = cmp.Or(cfg.WriteTimeout, 15*time.Second)
	cfg.IdleTimeout = cmp.Or(cfg.IdleTimeout, 60*time.Second)
	cfg.MaxHeaderBytes = cmp.Or(cfg.MaxHeaderBytes, 16<<10)
	cfg.PublishTimeout = cmp.Or(cfg.PublishTimeout, 5*time.Second)
	cfg.Workers = cmp.Or(cfg.Workers, 8)
	cfg.Hold = cmp.Or(cfg.Hold, 2*time.Minute)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg, js: js, res: res, jobs: owner, ns: ns, log: cfg.Logger, rnd: schedule.NewRand(0)}, nil
}

// Run serves HTTP on ln and applies deliveries until ctx ends; at shutdown
// it stops taking deliveries first, then finishes applying.
func (s *Service) Run(ctx context.Context, ln net.Listener) error {
	ensure := func(ctx context.Context) (jetstream.Consumer, error) {
		sctx, cancel := context.WithTimeout(ctx, startupTimeout)
		defer cancel()
		return events.EnsureConsumer(sctx, s.res.Webhooks, s.ns.WebhookConsumerConfig(s.cfg.Options))
	}
	c, err := ensure(ctx)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := httpserve.Run(gctx, ln, srv, 10*time.Second, nil); err != nil {
			return fmt.Errorf("webhook server: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		return consume.Recreate(gctx, c, ensure, consume.Options{Workers: s.cfg.Workers, Stream: s.res.Webhooks,
			Sweep: s.cfg.Sweep, Swept: s.cfg.Metrics.Orphans, Logger: s.log}, s.apply)
	})
	s.log.Info().Str(logkey.Addr, ln.Addr().String()).Msg("webhook receiver running")
	return g.Wait()
}

// Handler returns the receiver's HTTP handler.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/webhooks/{route}", s.receive)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			problem.MethodNotAllowed(w, r, http.MethodGet)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	// Every error has the front door's body (package problem), a wrong
	// path too.
	mux.Handle("/", problem.NotFound(""))
	return mux
}

// reply is the body of a delivery answered 2xx.
type reply struct {
	OK        bool `json:"ok"`
	Duplicate bool `json:"duplicate,omitempty"`
	// Ignored: about no job Pollux knows (a project-wide endpoint also
	// hears of jobs other applications made).
	Ignored bool `json:"ignored,omitempty"`
}

// The error codes of the webhook receiver besides those of package
// problem, with their HTTP status.
const (
	// CodeInvalidSignature (401): the delivery is not authentic, or stale.
	CodeInvalidSignature problem.Code = "invalid_signature"
	// CodeInvalidDelivery (400): the delivery cannot be read, before its
	// verification (malformed headers) or after it (a body that is not
	// the provider's, or names no job).
	CodeInvalidDelivery problem.Code = "invalid_delivery"
)

func (s *Service) receive(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	name := req.PathValue("route")
	req, span := s.receiveSpan(req, name)
	status := s.serve(w, req, name)
	endReceive(span, status)
	label := name
	if _, ok := s.cfg.Routes[name]; !ok {
		label = "_unknown" // bounded label: the path is attacker input
	}
	if s.cfg.Metrics.Received != nil {
		s.cfg.Metrics.Received(label, status, time.Since(start))
	}
}

func ok(w http.ResponseWriter, r reply) int {
	problem.WriteJSON(w, http.StatusOK, r)
	return http.StatusOK
}

func fail(w http.ResponseWriter, status int, code problem.Code, field, message string) int {
	problem.Write(w, status, problem.Detail{Code: code, Message: message, Field: field})
	return status
}

func (s *Service) serve(w http.ResponseWriter, req *http.Request, name string) int {
	if req.Method != http.MethodPost {
		problem.MethodNotAllowed(w, req, http.MethodPost)
		return http.StatusMethodNotAllowed
	}
	r, ok := s.cfg.Routes[name]
	if !ok || (r.Webhooks == nil && r.Callbacks == nil) {
		return fail(w, http.StatusNotFound, problem.CodeNotFound, "route", "no webhook route here")
	}
	if enc := req.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return fail(w, http.StatusUnsupportedMediaType, problem.CodeUnsupportedMediaType, "Content-Encoding", "compressed bodies are not accepted")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.WebhookMaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fail(w, http.StatusRequestEntityTooLarge, problem.CodeBodyTooLarge, "", fmt.Sprintf("body larger than %d bytes", r.WebhookMaxBody))
		}
		return fail(w, http.StatusBadRequest, CodeInvalidDelivery, "", "reading the body failed")
	}
	log := s.log.With().Str(logkey.Route, name).Logger()
	job := req.URL.Query().Get("job")
	if r.Callbacks != nil {
		return s.callback(w, req, r, job, body, log)
	}
	deliveryID, err := r.Webhooks.VerifyWebhook(req.Context(), req.Header, body)
	switch {
	case errors.Is(err, provider.ErrSignature):
		log.Warn().Err(err).Msg("webhook refused: bad signature")
		return fail(w, http.StatusUnauthorized, CodeInvalidSignature, "", "signature verification failed")
	case errors.Is(err, provider.ErrMalformed):
		log.Warn().Err(err).Msg("webhook refused: malformed")
		return fail(w, http.StatusBadRequest, CodeInvalidDelivery, "", "malformed delivery: "+err.Error())
	case err != nil:
		log.Error().Err(err).Msg("webhook verification unavailable")
		return fail(w, http.StatusServiceUnavailable, problem.CodeUnavailable, "", "verification unavailable, retry later")
	}
	// Authentic: what it says must be readable now, or it never will be.
	st, err := r.Webhooks.ParseWebhook(req.Header, body)
	switch {
	case err != nil:
		log.Warn().Err(err).Str(logkey.JobID, job).Msg("verified webhook refused: unreadable")
		return fail(w, http.StatusBadRequest, CodeInvalidDelivery, "", "the delivery is signed but cannot be read: "+err.Error())
	case st.RemoteID == "":
		log.Warn().Str(logkey.JobID, job).Msg("verified webhook refused: it names no remote job")
		return fail(w, http.StatusBadRequest, CodeInvalidDelivery, "", "the delivery is signed but names no job")
	case job == "" && r.Adapter.Info().WebhooksByRemoteID:
		// The account's one endpoint: the body's remote id names the job.
		var status int
		if job, status = s.byRemote(w, req, name, st.RemoteID, log); status != 0 {
			return status
		}
	}
	if !events.ValidToken(job) {
		log.Warn().Msg("verified webhook refused: its URL names no job")
		return fail(w, http.StatusBadRequest, problem.CodeInvalidParameter, "job", "missing or invalid query parameter: the job the delivery is about")
	}
	return s.store(w, req, name, job, deliveryID, body, nil, log)
}

// byRemote finds the job of a delivery to a route's one endpoint by its
// remote id (jobs.Webhooks.ByRemote); it returns the job, or the status it
// answered with. A remote id no job has is answered 200 and ignored
// (counted as dropped, unknown_job): the account's endpoint hears of every
// job, also those other applications made, and retrying would not change
// that. Such deliveries are hints (they name the job only), so one that
// beat the recording of its create's answer loses nothing the job's polls
// do not find. A NATS failure is answered 503 with Retry-After.
func (s *Service) byRemote(w http.ResponseWriter, req *http.Request, route, remoteID string, log zerolog.Logger) (string, int) {
	ctx, cancel := context.WithTimeout(req.Context(), s.cfg.PublishTimeout)
	defer cancel()
	job, err := s.jobs.ByRemote(ctx, route, remoteID)
	switch {
	case err == nil:
		return job, 0
	case errors.Is(err, state.ErrNotFound):
		log.Info().Str(logkey.RemoteID, remoteID).Msg("verified webhook about a remote job Pollux does not know; ignored")
		s.drop(route, "unknown_job")
		return "", ok(w, reply{OK: true, Ignored: true})
	}
	log.Warn().Err(err).Msg("looking the remote id up failed")
	w.Header().Set("Retry-After", "5")
	return "", fail(w, http.StatusServiceUnavailable, problem.CodeUnavailable, "", "lookup unavailable, retry later")
}

// callback takes an unsigned callback: the job's token (when the route
// has a callback secret) stands in for a signature, and the delivery is
// stored as a hint, identified by its content.
func (s *Service) callback(w http.ResponseWriter, req *http.Request, r *route.Route, job string, body []byte, log zerolog.Logger) int {
	if !events.ValidToken(job) {
		return fail(w, http.StatusBadRequest, problem.CodeInvalidParameter, "job", "missing or invalid query parameter: the job the callback is about")
	}
	if !r.ValidCallbackToken(job, req.URL.Query().Get("token")) {
		log.Warn().Str(logkey.JobID, job).Msg("callback refused: bad token")
		return fail(w, http.StatusUnauthorized, CodeInvalidSignature, "token", "invalid for this job")
	}
	remoteID, err := r.Callbacks.CallbackRemoteID(body)
	if err != nil {
		log.Warn().Err(err).Msg("callback refused: malformed")
		return fail(w, http.StatusBadRequest, CodeInvalidDelivery, "", "malformed callback: "+err.Error())
	}
	sum := sha256.Sum256(body)
	extra := nats.Header{HeaderCallback: {"1"}, HeaderRemoteID: {remoteID}}
	return s.store(w, req, r.Name, job, "cb-"+hex.EncodeToString(sum[:16]), body, extra, log)
}

// store publishes a verified delivery with its delivery id as Nats-Msg-Id,
// answers 2xx after the PubAck, and remembers the id for the retry horizon.
// One deadline, PublishTimeout, bounds all three calls to NATS: while NATS
// is away the lookup would otherwise wait out the JetStream context's
// default timeout (5s) before the publish even began.
func (s *Service) store(w http.ResponseWriter, req *http.Request, name, job, deliveryID string, body []byte, extra nats.Header, log zerolog.Logger) int {
	pctx, cancel := context.WithTimeout(req.Context(), s.cfg.PublishTimeout)
	defer cancel()
	seenKey := deliveryKey(name, deliveryID)
	if _, err := s.res.Deliveries.Get(pctx, seenKey); err == nil {
		return ok(w, reply{OK: true, Duplicate: true})
	}
	msg := &nats.Msg{Subject: s.ns.Webhook(name), Data: body, Header: storedHeaders(req.Header)}
	msg.Header.Set(HeaderJob, job)
	msg.Header.Set(HeaderDelivery, deliveryID)
	msg.Header.Set(HeaderReceivedAt, s.cfg.Now().UTC().Format(time.RFC3339Nano))
	for k, v := range extra {
		msg.Header[k] = v
	}
	s.jobs.Tracer().Inject(req.Context(), msg.Header) // the receipt's span, when tracing
	ack, err := s.js.PublishMsg(pctx, msg, jetstream.WithMsgID(name+":"+deliveryID))
	if err != nil {
		log.Error().Err(err).Str(logkey.JobID, job).Msg("storing a webhook failed; asked the provider to retry")
		return fail(w, http.StatusServiceUnavailable, problem.CodeUnavailable, "", "temporarily unavailable, retry later")
	}
	// Remember the delivery for the retry horizon. If this fails the
	// delivery is stored all the same; a retry is then caught by the
	// stream's duplicate window, and applying it twice changes nothing.
	if _, err := s.res.Deliveries.Create(pctx, seenKey, []byte(job)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		log.Warn().Err(err).Msg("recording the delivery id failed")
	}
	return ok(w, reply{OK: true, Duplicate: ack.Duplicate})
}

// deliveryKey is the deliveries bucket key of a route's delivery id (ids
// may hold characters keys cannot).
func deliveryKey(route, id string) string {
	sum := sha256.Sum256([]byte(id))
	return route + "." + hex.EncodeToString(sum[:16])
}

// storedHeaders keeps the delivery's headers except credentials and any
// that pose as Pollux's own: its Pollux-* headers, and a trace context
// (traceparent, tracestate), which on a stored delivery is its receipt's
// (the applier links its span to it). The tracer's Inject replaces one
// only when tracing is on; a receiver with tracing off would otherwise
// store the sender's for an applier with tracing on to link to.
func storedHeaders(h http.Header) nats.Header {
	out := nats.Header{}
	for k, v := range h {
		switch ck := http.CanonicalHeaderKey(k); {
		case ck == "Authorization", ck == "Cookie", ck == "Proxy-Authorization", strings.HasPrefix(ck, "Pollux-"),
			strings.EqualFold(ck, tracing.Header), strings.EqualFold(ck, "tracestate"):
			continue
		}
		out[k] = v
	}
	return out
}
