// Package notify delivers job events to applications' HTTP endpoints:
// outbound webhooks, for apps that would rather be called than hold a NATS
// connection or an event stream.
//
// # What an endpoint gets
//
// A route names the endpoints that receive its jobs' events (routes.<r>.
// notify, endpoints under notify.endpoints), and a submission may name one
// of its own (notify_url, where notify.submissions allows it). Each
// delivery is a POST of the event as published on pollux.events.<route>.
// <job> (api/schemas/event.json), signed with Standard Webhooks: the
// webhook-id header ("pollux_<job>_<seq>", the same on every attempt: the
// receiver dedupes on it), webhook-timestamp, and webhook-signature with a
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" per secret (two while a
// secret rotates). An endpoint gets every event of a job ("all", the
// default) or its end only ("terminal").
//
// A submission made through a provider's face is delivered in that
// provider's shape instead (package faceshape renders it as the face
// answers): a Replicate create's webhook gets the prediction, for the
// events its filter names, signed with the submitting token's derived
// secret; a fal submit's fal_webhook gets fal's webhook body once, at the
// job's end, signed as fal signs (X-Fal-Webhook-* headers, Ed25519 with
// the key signature.DeriveFalKey derives from the current server secret,
// whose public half the front door's JWKS publishes), its app as fal's
// user id.
//
// # Guarantees
//
//   - At least once: an event is delivered until the endpoint answers 2xx,
//     retried with exponential backoff (5 s doubling to 1 h, ±20% jitter,
//     at least the endpoint's Retry-After) for the endpoint's horizon
//     (default 24 h) from when the event was copied to the outbox, then
//     given up; an answer 410 gives it up at once.
//   - In order per job and endpoint: a delivery waits while an earlier one
//     of the same job to the same endpoint is not yet delivered or given up
//     (the oldest message on the job's outbox subject goes first).
//   - Nothing lost across restarts: events are copied, in order, from the
//     events stream (a durable consumer, one event at a time fleet-wide) to
//     a work-queue stream (events.OutboxStream), one subject per endpoint
//     and job, which the deliverers consume; a message leaves only once
//     delivered or given up.
//   - One endpoint does not hold up another: each has its own consumer and
//     workers, a timeout per call, and a circuit breaker per host that,
//     after 5 failures in a row, stops calling it for a cooldown (5 s
//     doubling to 5 min) during which its deliveries wait without taking a
//     worker.
//   - SSRF-safe by default: a call is refused on the address it would
//     reach — loopback, private, link-local, multicast, unspecified,
//     shared (100.64/10) — whatever name resolved to it, with no proxy from
//     the environment and no redirects followed, unless the endpoint sets
//     allow_private. A refused delivery is given up at once.
//
// Each job's state at each endpoint (attempts, the last answer, the next
// attempt) is kept in the outbox bucket (events.OutboxDelivery, beside the
// bucket's names in package events, so that the front door and `pollux
// get`, which show it, read it without importing this service).
// Metrics: pollux_notify_deliveries_total{endpoint,outcome},
// pollux_notify_call_seconds{endpoint}, pollux_notify_circuit_open{endpoint}.
package notify

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/core/consume"
	"github.com/pollux-dev/pollux/internal/core/faceshape"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/signature"
)

// Metrics observe the service; nil fields are ignored. They must not block.
type Metrics struct {
	// Delivery counts a delivery's outcome by endpoint: delivered,
	// failed (to be retried), given_up, refused (Pollux's address rules).
	Delivery func(endpoint, outcome string)
	// Call observes one call's duration by endpoint.
	Call func(endpoint string, d time.Duration)
	// Circuit reports an endpoint's circuit opening (true) or closing.
	Circuit func(endpoint string, open bool)
}

// Outcomes of a delivery (Metrics.Delivery).
var Outcomes = []string{"delivered", "failed", "given_up", "refused"}

// Config configures the service. Zero values mean the defaults on each field.
type Config struct {
	// Notify is the configuration's notify section.
	Notify config.Notify
	// Routes are the endpoints each route's job events go to, by route.
	Routes map[string][]string
	// KeepsOutputs reports whether a route keeps its outputs
	// (keep_outputs): a Replicate webhook then links Pollux's copies, as
	// the face does (faceshape.OutputURL). Nil: none does.
	KeepsOutputs func(route string) bool
	// Options size the streams (see events.Options).
	Options events.Options
	// Logger receives the service's log lines (default: none).
	Logger zerolog.Logger
	// Metrics observe the service.
	Metrics Metrics
	// RetryBase is the wait after a delivery's first failed attempt,
	// doubling to 1 h (default 5s).
	RetryBase time.Duration
	// CircuitFailures failures in a row open an endpoint host's circuit,
	// for CircuitCooldown first (defaults DefaultCircuitFailures and
	// DefaultCircuitCooldown).
	CircuitFailures int
	CircuitCooldown time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Seed seeds the jitter (default: random).
	Seed uint64
}

// Service copies job events to the outbox and delivers them.
type Service struct {
	cfg       Config
	js        jetstream.JetStream
	ns        events.Namespace
	log       zerolog.Logger
	rnd       *rand.Rand
	endpoints map[string]*endpoint // by name, "submission" for submissions' own
	outbox    jetstream.Stream
	states    jetstream.KeyValue
}

// Enabled reports whether a configuration has anything to deliver.
func Enabled(n config.Notify) bool { return len(n.Endpoints) > 0 || n.Submissions != nil }

// New prepares the service: every endpoint's secrets must be readable.
func New(cfg Config, js jetstream.JetStream, ns events.Namespace) (*Service, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.RetryBase = cmp.Or(cfg.RetryBase, 5*time.Second)
	s := &Service{cfg: cfg, js: js, ns: ns, log: cfg.Logger.With().Str(logkey.Component, "notify").Logger(),
		rnd: schedule.NewRand(cfg.Seed), endpoints: map[string]*endpoint{}}
	for name, ec := range cfg.Notify.Endpoints {
		e, err := newEndpoint(name, ec)
		if err != nil {
			return nil, fmt.Errorf("notify.endpoints.%s: %w", name, err)
		}
		s.endpoints[name] = e
	}
	if sc := cfg.Notify.Submissions; sc != nil {
		e, err := newEndpoint(config.NotifySubmissions, *sc)
		if err != nil {
			return nil, fmt.Errorf("notify.submissions: %w", err)
		}
		s.endpoints[config.NotifySubmissions] = e
	}
	for _, e := range s.endpoints {
		e.circuits.after = cmp.Or(cfg.CircuitFailures, DefaultCircuitFailures)
		e.circuits.cooldown = cmp.Or(cfg.CircuitCooldown, DefaultCircuitCooldown)
	}
	for route, names := range cfg.Routes {
		for _, n := range names {
			if s.endpoints[n] == nil {
				return nil, fmt.Errorf("routes.%s.notify: no endpoint named %q", route, n)
			}
		}
	}
	return s, nil
}

// startupTimeout bounds the JetStream calls made before the service runs.
const startupTimeout = 30 * time.Second

// Run copies and delivers until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	var err error
	if s.outbox, err = events.EnsureStream(sctx, s.js, s.ns.OutboxStreamConfig(s.cfg.Options)); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	if s.states, err = events.EnsureBucket(sctx, s.js, s.ns.OutboxBucketConfig(s.cfg.Options)); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	eventsStream, err := s.js.Stream(sctx, s.ns.EventsStream())
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	copyCfg := jetstream.ConsumerConfig{
		Durable:     s.ns.Prefix() + "-notify-copy",
		Description: "Pollux outbound webhooks: copies job events to the outbox, in order",
		// Job events only: a route event's subject is one token shorter.
		FilterSubject: s.ns.Event("*", "*"),
		DeliverPolicy: jetstream.DeliverNewPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		// One at a time, fleet-wide, so an ack lost to a NATS restart or
		// a killed process holds every endpoint's webhooks until the
		// event comes back: a few seconds, not the usual 30. A copy is a
		// publish per endpoint, deduplicated, so one redelivered while
		// still being copied is stored once.
		AckWait:       copyAckWait,
		MaxDeliver:    -1,
		MaxAckPending: 1, // one at a time, fleet-wide: the outbox keeps each job's order
		Replicas:      s.cfg.Options.Replicas,
	}
	ensureCopy := func(ctx context.Context) (jetstream.Consumer, error) {
		return events.EnsureConsumer(ctx, eventsStream, copyCfg)
	}
	copier, err := ensureCopy(sctx)
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return consume.Recreate(ctx, copier, ensureCopy, consume.Options{Workers: 1, Logger: s.log}, s.copy)
	})
	for _, e := range s.endpoints {
		dcfg := jetstream.ConsumerConfig{
			Durable:       s.ns.Prefix() + "-notify-" + e.name,
			Description:   "Pollux outbound webhooks to endpoint " + e.name,
			FilterSubject: s.ns.Outbox(e.name, "*"),
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       e.timeout + 30*time.Second,
			MaxDeliver:    -1,
			MaxAckPending: 4096,
			Replicas:      s.cfg.Options.Replicas,
		}
		ensure := func(ctx context.Context) (jetstream.Consumer, error) {
			return events.EnsureConsumer(ctx, s.outbox, dcfg)
		}
		c, err := ensure(sctx)
		if err != nil {
			return fmt.Errorf("notify: endpoint %s: %w", e.name, err)
		}
		g.Go(func() error {
			return consume.Recreate(ctx, c, ensure, consume.Options{Workers: e.workers, Stream: s.outbox,
				Logger: s.log.With().Str(logkey.Endpoint, e.name).Logger()},
				func(ctx context.Context, msg jetstream.Msg) events.Outcome { return s.deliver(ctx, e, msg) })
		})
	}
	s.log.Info().Int(logkey.Endpoints, len(s.endpoints)).Msg("outbound webhooks running")
	return g.Wait()
}

// HeaderURL carries a submission's own endpoint URL on its deliveries.
const HeaderURL = "Pollux-Notify-Url"

// copy copies one job event to the outbox subjects of the endpoints that
// want it.
func (s *Service) copy(ctx context.Context, msg jetstream.Msg) events.Outcome {
	ev, err := events.DecodeEvent(msg.Data())
	if err != nil || ev.JobID == "" {
		return events.Done() // not a job event this version reads
	}
	var targets []*endpoint
	for _, name := range s.cfg.Routes[ev.Route] {
		targets = append(targets, s.endpoints[name])
	}
	own := ""
	if ev.Job != nil && ev.Job.NotifyURL != "" {
		if e := s.endpoints[config.NotifySubmissions]; e != nil {
			targets, own = append(targets, e), ev.Job.NotifyURL
		}
	}
	for _, e := range targets {
		if e.terminal && (!ev.State.Terminal() || events.CustodyEvent(ev.Type)) {
			continue
		}
		if e.name == config.NotifySubmissions && !faceshape.HookWants(ev.Job, ev.Type) {
			continue // not an event the face's webhook gets (faceshape.HookWants)
		}
		out := &natsMsg{subject: s.ns.Outbox(e.name, ev.JobID), data: msg.Data()}
		if e.name == config.NotifySubmissions {
			out.url = own
		}
		id := fmt.Sprintf("notify:%s:%s:%d:%s", e.name, ev.JobID, ev.Seq, ev.Type)
		if err := s.publish(ctx, out, id); err != nil {
			s.log.Warn().Err(err).Str(logkey.JobID, ev.JobID).Str(logkey.Endpoint, e.name).Msg("copying an event to the outbox failed; retrying")
			return events.Later(schedule.Jitter(time.Second, schedule.RetryJitter, s.rnd))
		}
	}
	return events.Done()
}

// copyAckWait is how long the copier's event waits for its ack before it
// is delivered again (to this process or another).
const copyAckWait = 5 * time.Second

// deliver makes one attempt at a delivery, in its job's order.
func (s *Service) deliver(ctx context.Context, e *endpoint, msg jetstream.Msg) events.Outcome {
	now := s.cfg.Now()
	md, err := msg.Metadata()
	if err != nil {
		return events.Stop()
	}
	ev, err := events.DecodeEvent(msg.Data())
	if err != nil || ev.JobID == "" {
		s.log.Error().Err(err).Str(logkey.Endpoint, e.name).Msg("dropping an unreadable outbox message")
		return events.Stop()
	}
	target := cmp.Or(e.url, msg.Headers().Get(HeaderURL))
	log := s.log.With().Str(logkey.Endpoint, e.name).Str(logkey.JobID, ev.JobID).Uint64(logkey.Seq, ev.Seq).Logger()
	// In order: the oldest message of the job's subject goes first.
	first, err := s.outbox.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(msg.Subject()))
	switch {
	case err != nil && !errors.Is(err, jetstream.ErrMsgNotFound):
		return events.Later(schedule.Jitter(time.Second, schedule.RetryJitter, s.rnd))
	case err == nil && first.Sequence < md.Sequence.Stream:
		return events.Later(schedule.Jitter(500*time.Millisecond, schedule.RetryJitter, s.rnd))
	}
	st := s.state(ctx, ev.JobID, e.name)
	if st.Seq != ev.Seq {
		st.Seq, st.Attempts = ev.Seq, 0
	}
	st.URL = msg.Headers().Get(HeaderURL)
	if age := now.Sub(md.Timestamp); age > e.horizon {
		st.State, st.NextAt = events.OutboxGivenUp, time.Time{}
		st.Last = fmt.Sprintf("given up after %s (%d attempts): %s", e.horizon, st.Attempts, st.Last)
		s.save(ctx, ev.JobID, st)
		s.count(e.name, "given_up")
		log.Warn().Int(logkey.Attempts, st.Attempts).Msg("delivery given up: past the endpoint's horizon")
		return events.Stop()
	}
	host := hostOf(target)
	if wait := e.circuits.allow(host, now); wait > 0 {
		return events.Later(wait + schedule.Jitter(time.Second, 1, s.rnd))
	}
	body, sign, err := s.render(e, ev, msg.Data())
	if err != nil {
		log.Error().Err(err).Msg("dropping a delivery that cannot be rendered")
		return events.Stop()
	}
	cctx, cancel := context.WithTimeout(ctx, e.timeout)
	start := time.Now()
	a := e.call(cctx, target, now, body, sign)
	cancel()
	if s.cfg.Metrics.Call != nil {
		s.cfg.Metrics.Call(e.name, time.Since(start))
	}
	if ctx.Err() != nil && !a.ok() {
		return events.Later(time.Second) // stopping: the attempt does not count
	}
	st.Attempts++
	st.Total++
	st.Last, st.LastAt = a.summary(), now
	var refused *RefusedError
	switch {
	case a.ok():
		st.State, st.Delivered, st.NextAt = events.OutboxDelivered, max(st.Delivered, ev.Seq), time.Time{}
		s.save(ctx, ev.JobID, st)
		s.circuit(e, host, true, now)
		s.count(e.name, "delivered")
		return events.Stop()
	case errors.As(a.err, &refused), a.status == 410:
		st.State, st.NextAt = events.OutboxGivenUp, time.Time{}
		s.save(ctx, ev.JobID, st)
		outcome := "given_up"
		if refused != nil {
			outcome = "refused"
		}
		s.count(e.name, outcome)
		log.Warn().Str(logkey.Answer, a.summary()).Msg("delivery given up")
		return events.Stop()
	}
	s.circuit(e, host, false, now)
	delay := max(schedule.Backoff{Base: s.cfg.RetryBase, Max: time.Hour}.Next(st.Attempts, s.rnd), a.retryAfter)
	st.State, st.NextAt = events.OutboxDelivering, now.Add(delay)
	s.save(ctx, ev.JobID, st)
	s.count(e.name, "failed")
	log.Info().Str(logkey.Answer, a.summary()).Int(logkey.Attempts, st.Attempts).Dur(logkey.RetryIn, delay).Msg("delivery failed; retrying")
	return events.Later(delay)
}

// render is a delivery's body and how it is signed: the event as
// published, under the endpoint's secrets (Standard Webhooks); or, to the
// webhook of a face's create, the face's object as the face answers it:
//   - a Replicate create's webhook, the prediction, and a Luma create's
//     callback_url, the generation (Luma signs nothing; the headers are
//     there for an app that wants them), under the submitter's secrets
//     (signature.DeriveSecret of each of the endpoint's and the token's
//     name: its current secret, which the Replicate face's GET
//     /v1/webhooks/default/secret answers, and during a rotation the
//     other's too);
//   - a fal submit's webhook, fal's webhook body, signed as fal signs with
//     the endpoint's fal key (its current secret's: the front door's JWKS
//     lists every secret's) for the job's app as fal's user id.
func (s *Service) render(e *endpoint, ev *events.Event, data []byte) ([]byte, signer, error) {
	id := fmt.Sprintf("pollux_%s_%d", ev.JobID, ev.Seq)
	if e.name != config.NotifySubmissions {
		return data, standardSigner(id, e.secrets), nil
	}
	keeps := s.cfg.KeepsOutputs != nil && s.cfg.KeepsOutputs(ev.Route)
	var body []byte
	var err error
	switch {
	case faceshape.FalHook(ev.Job):
		if body, err = faceshape.FalWebhookBody(ev.Job, keeps); err != nil {
			return nil, nil, err
		}
		return body, falSigner(e.falKey, ev.JobID, faceshape.FalUserID(ev.Job)), nil
	case faceshape.ReplicateHook(ev.Job):
		body, err = faceshape.ReplicateWebhookBody(ev.Job, keeps)
	case faceshape.LumaHook(ev.Job):
		body, err = faceshape.LumaCallbackBody(ev.Job, keeps)
	default:
		return data, standardSigner(id, e.secrets), nil
	}
	if err != nil {
		return nil, nil, err
	}
	secrets := make([][]byte, len(e.secrets))
	for i, k := range e.secrets {
		secrets[i] = signature.DeriveSecret(k, ev.Job.SubmittedBy)
	}
	return body, standardSigner(id, secrets), nil
}

func (s *Service) circuit(e *endpoint, host string, ok bool, now time.Time) {
	open := e.circuits.done(host, ok, now)
	if s.cfg.Metrics.Circuit != nil {
		s.cfg.Metrics.Circuit(e.name, open)
	}
}

func (s *Service) count(endpoint, outcome string) {
	if s.cfg.Metrics.Delivery != nil {
		s.cfg.Metrics.Delivery(endpoint, outcome)
	}
}

// hostOf is a URL's host, the key of its circuit.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Host
}
