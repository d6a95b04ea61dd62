// Package webhook is cmd/webhook's service: an HTTP receiver that verifies
// each provider delivery before reading it, publishes it to JetStream with
// the provider's delivery id as Nats-Msg-Id and answers 2xx only after the
// PubAck (503 with Retry-After when NATS cannot take it, never 410); and a
// consumer that applies the stored deliveries to job state, stopping a job's
// polling at once when a delivery makes it terminal.
package webhook

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/consume"
	"github.com/pollux-dev/pollux/internal/httpserve"
	"github.com/pollux-dev/pollux/internal/lifecycle"
	"github.com/pollux-dev/pollux/internal/poller"
	"github.com/pollux-dev/pollux/internal/route"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
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
	// Hinted observes an unsigned callback that brought a job's check
	// forward, by route.
	Hinted func(route string)
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
	// PublishTimeout bounds the wait for the PubAck (default 5s).
	PublishTimeout time.Duration
	// Workers apply deliveries concurrently (default 8).
	Workers int
	// Logger receives the service's log lines (default: none).
	Logger zerolog.Logger
	// Metrics observe the service.
	Metrics Metrics
	// Learned returns the learned durations (nil: none are learned), to
	// count the polls of a check a delivery removes (poller.CountPolls).
	Learned poller.Learned
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Service receives and applies webhooks.
type Service struct {
	cfg  Config
	js   jetstream.JetStream
	res  *events.Resources
	life *lifecycle.Lifecycle
	ns   events.Namespace
	log  zerolog.Logger
}

// New validates the configuration and prepares the service.
func New(cfg Config, js jetstream.JetStream, ns events.Namespace, res *events.Resources, life *lifecycle.Lifecycle) (*Service, error) {
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
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg, js: js, res: res, life: life, ns: ns, log: cfg.Logger}, nil
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
		return consume.Recreate(gctx, c, ensure, consume.Options{Workers: s.cfg.Workers, Stream: s.res.Webhooks, Swept: s.cfg.Metrics.Orphans, Logger: s.log}, s.apply)
	})
	s.log.Info().Str("addr", ln.Addr().String()).Msg("webhook receiver running")
	return g.Wait()
}

// Handler returns the receiver's HTTP handler.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/webhooks/{route}", s.receive)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	})
	return mux
}

type reply struct {
	OK        bool   `json:"ok"`
	Duplicate bool   `json:"duplicate,omitempty"`
	Error     string `json:"error,omitempty"`
}

func (s *Service) receive(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	name := req.PathValue("route")
	status := s.serve(w, req, name)
	label := name
	if _, ok := s.cfg.Routes[name]; !ok {
		label = "_unknown" // bounded label: the path is attacker input
	}
	if s.cfg.Metrics.Received != nil {
		s.cfg.Metrics.Received(label, status, time.Since(start))
	}
}

func write(w http.ResponseWriter, status int, r reply) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(r)
	return status
}

func (s *Service) serve(w http.ResponseWriter, req *http.Request, name string) int {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return write(w, http.StatusMethodNotAllowed, reply{Error: "POST only"})
	}
	r, ok := s.cfg.Routes[name]
	if !ok || (r.Webhooks == nil && r.Callbacks == nil) {
		return write(w, http.StatusNotFound, reply{Error: "no webhook route here"})
	}
	if enc := req.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return write(w, http.StatusUnsupportedMediaType, reply{Error: "compressed bodies are not accepted"})
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.WebhookMaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return write(w, http.StatusRequestEntityTooLarge, reply{Error: fmt.Sprintf("body larger than %d bytes", r.WebhookMaxBody)})
		}
		return write(w, http.StatusBadRequest, reply{Error: "reading the body failed"})
	}
	log := s.log.With().Str("route", name).Logger()
	job := req.URL.Query().Get("job")
	if r.Callbacks != nil {
		return s.callback(w, req, r, job, body, log)
	}
	deliveryID, err := r.Webhooks.VerifyWebhook(req.Context(), req.Header, body)
	switch {
	case errors.Is(err, provider.ErrSignature):
		log.Warn().Err(err).Msg("webhook refused: bad signature")
		return write(w, http.StatusUnauthorized, reply{Error: "signature verification failed"})
	case errors.Is(err, provider.ErrMalformed):
		log.Warn().Err(err).Msg("webhook refused: malformed")
		return write(w, http.StatusBadRequest, reply{Error: "malformed delivery"})
	case err != nil:
		log.Error().Err(err).Msg("webhook verification unavailable")
		w.Header().Set("Retry-After", "5")
		return write(w, http.StatusServiceUnavailable, reply{Error: "verification unavailable, retry later"})
	}
	if !events.ValidToken(job) {
		return write(w, http.StatusBadRequest, reply{Error: "job: missing or invalid query parameter"})
	}
	return s.store(w, req, name, job, deliveryID, body, nil, log)
}

// callback takes an unsigned callback: the job's token (when the route
// has a callback secret) stands in for a signature, and the delivery is
// stored as a hint, identified by its content.
func (s *Service) callback(w http.ResponseWriter, req *http.Request, r *route.Route, job string, body []byte, log zerolog.Logger) int {
	if !events.ValidToken(job) {
		return write(w, http.StatusBadRequest, reply{Error: "job: missing or invalid query parameter"})
	}
	if !r.ValidCallbackToken(job, req.URL.Query().Get("token")) {
		log.Warn().Str("job_id", job).Msg("callback refused: bad token")
		return write(w, http.StatusUnauthorized, reply{Error: "token: invalid for this job"})
	}
	remoteID, err := r.Callbacks.CallbackRemoteID(body)
	if err != nil {
		log.Warn().Err(err).Msg("callback refused: malformed")
		return write(w, http.StatusBadRequest, reply{Error: "malformed callback"})
	}
	sum := sha256.Sum256(body)
	extra := nats.Header{HeaderCallback: {"1"}, HeaderRemoteID: {remoteID}}
	return s.store(w, req, r.Name, job, "cb-"+hex.EncodeToString(sum[:16]), body, extra, log)
}

// store publishes a verified delivery with its delivery id as Nats-Msg-Id,
// answers 2xx after the PubAck, and remembers the id for the retry horizon.
func (s *Service) store(w http.ResponseWriter, req *http.Request, name, job, deliveryID string, body []byte, extra nats.Header, log zerolog.Logger) int {
	seenKey := deliveryKey(name, deliveryID)
	if _, err := s.res.Deliveries.Get(req.Context(), seenKey); err == nil {
		return write(w, http.StatusOK, reply{OK: true, Duplicate: true})
	}
	msg := &nats.Msg{Subject: s.ns.Webhook(name), Data: body, Header: storedHeaders(req.Header)}
	msg.Header.Set(HeaderJob, job)
	msg.Header.Set(HeaderDelivery, deliveryID)
	msg.Header.Set(HeaderReceivedAt, s.cfg.Now().UTC().Format(time.RFC3339Nano))
	for k, v := range extra {
		msg.Header[k] = v
	}
	pctx, cancel := context.WithTimeout(req.Context(), s.cfg.PublishTimeout)
	defer cancel()
	ack, err := s.js.PublishMsg(pctx, msg, jetstream.WithMsgID(name+":"+deliveryID))
	if err != nil {
		log.Error().Err(err).Str("job_id", job).Msg("storing a webhook failed; asked the provider to retry")
		w.Header().Set("Retry-After", "5")
		return write(w, http.StatusServiceUnavailable, reply{Error: "temporarily unavailable, retry later"})
	}
	// Remember the delivery for the retry horizon. If this fails the
	// delivery is stored all the same; a retry is then caught by the
	// stream's duplicate window, and applying it twice changes nothing.
	if _, err := s.res.Deliveries.Create(pctx, seenKey, []byte(job)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		log.Warn().Err(err).Msg("recording the delivery id failed")
	}
	return write(w, http.StatusOK, reply{OK: true, Duplicate: ack.Duplicate})
}

// deliveryKey is the deliveries bucket key of a route's delivery id (ids
// may hold characters keys cannot).
func deliveryKey(route, id string) string {
	sum := sha256.Sum256([]byte(id))
	return route + "." + hex.EncodeToString(sum[:16])
}

// storedHeaders keeps the delivery's headers except credentials and any
// that pose as Pollux's own.
func storedHeaders(h http.Header) nats.Header {
	out := nats.Header{}
	for k, v := range h {
		switch ck := http.CanonicalHeaderKey(k); {
		case ck == "Authorization", ck == "Cookie", ck == "Proxy-Authorization", strings.HasPrefix(ck, "Pollux-"):
			continue
		}
		out[k] = v
	}
	return out
}

// apply applies one stored delivery to its job.
func (s *Service) apply(ctx context.Context, msg jetstream.Msg) events.Outcome {
	name, err := s.ns.ParseWebhook(msg.Subject())
	if err != nil {
		s.log.Error().Err(err).Msg("dropping a delivery on an unexpected subject")
		return events.Stop()
	}
	r, ok := s.cfg.Routes[name]
	if !ok || (r.Webhooks == nil && r.Callbacks == nil) {
		// Another process serves this route; leave it for that process.
		s.log.Warn().Str("route", name).Msg("delivery for a route this process does not serve; redelivering later")
		return events.Later(30 * time.Second)
	}
	h := http.Header(msg.Headers())
	id, delivery := h.Get(HeaderJob), h.Get(HeaderDelivery)
	log := s.log.With().Str("route", name).Str("job_id", id).Str("delivery_id", delivery).Logger()
	if h.Get(HeaderCallback) != "" {
		return s.hint(ctx, name, id, h.Get(HeaderRemoteID), log)
	}
	if r.Webhooks == nil {
		log.Error().Msg("dropping a signed delivery on a route that takes only callbacks")
		return events.Stop()
	}
	st, err := r.Webhooks.ParseWebhook(h, msg.Data())
	if err != nil {
		log.Error().Err(err).Msg("dropping an unreadable delivery")
		return events.Stop()
	}
	now := s.cfg.Now().UTC()
	var polls int
	var seen *lifecycle.Seen // the job's check, read once for counting and removing
	if st.Observation.State.Terminal() {
		// The job's check goes once this ends the job: its quiet polls
		// go into the record first.
		if seen, err = s.life.CurrentCheck(ctx, name, id); err != nil {
			seen = nil // Disarm reads it again
		}
		polls, _, _ = poller.CountPolls(r, s.cfg.Learned, seen, now)
	}
	changed := false
	j, err := s.life.Update(ctx, id, func(cur *state.Job) error {
		if cur.Route != name || cur.RemoteID != st.RemoteID {
			return errMismatch
		}
		if !cur.Delivered(delivery) {
			return state.ErrNoChange // applied before: a duplicate the transport let through
		}
		obs := st.Observation
		obs.Source, obs.At = state.FromWebhook, now
		changed = cur.Apply(obs) != ""
		if changed && cur.State.Terminal() {
			cur.Polls = max(cur.Polls, polls)
		}
		return nil
	})
	switch {
	case errors.Is(err, state.ErrNotFound):
		log.Warn().Msg("delivery for an unknown job; dropped")
		return events.Stop()
	case errors.Is(err, errMismatch):
		log.Warn().Str("remote_id", st.RemoteID).Msg("delivery does not match the job's route or remote id; dropped")
		return events.Stop()
	case err != nil:
		log.Warn().Err(err).Msg("applying a delivery failed; retrying")
		return events.Later(2 * time.Second)
	}
	if s.cfg.Metrics.Applied != nil {
		s.cfg.Metrics.Applied(name, changed)
	}
	if j.State.Terminal() {
		// Idempotent, so a retried delivery stops polling too.
		if err := s.life.Disarm(ctx, j.Route, j.ID, seen); err != nil {
			// A quiet poll reads no record, so the check must go: the
			// delivery is retried (it is applied once; the retry disarms).
			log.Warn().Err(err).Msg("stopping the job's polling failed; retrying")
			return events.Later(2 * time.Second)
		}
	}
	if changed && j.State.Terminal() {
		log.Info().Str("state", string(j.State)).Str("remote_id", j.RemoteID).Msg("job finished (webhook)")
	}
	return events.Done()
}

var errMismatch = errors.New("delivery does not match the job")

// hint answers an unsigned callback: it changes nothing itself, but brings
// the job's next status check forward to now, so whatever the callback
// claims is confirmed by the provider before the job moves.
func (s *Service) hint(ctx context.Context, name, id, remoteID string, log zerolog.Logger) events.Outcome {
	now := s.cfg.Now().UTC()
	// The check is replaced: its quiet polls go into the record (and so
	// into the new check's context) first.
	seen, err := s.life.CurrentCheck(ctx, name, id)
	if err != nil {
		seen = nil // Rearm reads it again
	}
	polls, unchanged, _ := poller.CountPolls(s.cfg.Routes[name], s.cfg.Learned, seen, now)
	j, err := s.life.Update(ctx, id, func(cur *state.Job) error {
		switch {
		case cur.Route != name || cur.RemoteID != remoteID:
			return errMismatch
		case cur.State.Terminal():
			return state.ErrNoChange
		}
		cur.Polls, cur.Unchanged = max(cur.Polls, polls), max(cur.Unchanged, unchanged)
		// The record's next check time dates from the job's last change
		// (quiet polls do not write it), so it cannot say whether a check
		// is already due: the check is always replaced.
		cur.NextCheckAt = now
		return nil
	})
	switch {
	case errors.Is(err, state.ErrNotFound):
		log.Warn().Msg("callback for an unknown job; dropped")
		return events.Stop()
	case errors.Is(err, errMismatch):
		log.Warn().Str("remote_id", remoteID).Msg("callback does not match the job's route or remote id; dropped")
		return events.Stop()
	case err != nil:
		log.Warn().Err(err).Msg("applying a callback failed; retrying")
		return events.Later(2 * time.Second)
	}
	if j.State.Terminal() {
		return events.Done()
	}
	if err := s.life.Rearm(ctx, j, now, seen); err != nil {
		log.Warn().Err(err).Msg("bringing the check forward failed; retrying")
		return events.Later(2 * time.Second)
	}
	if s.cfg.Metrics.Hinted != nil {
		s.cfg.Metrics.Hinted(name)
	}
	log.Debug().Msg("callback: checking the job now")
	return events.Done()
}
