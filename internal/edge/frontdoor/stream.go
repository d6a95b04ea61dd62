package frontdoor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/internal/edge/tenant"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/logkey"
	"github.com/pollux-dev/pollux/pkg/state"
)

// events handles GET /v1/jobs/{id}/events: the job's events as
// Server-Sent Events, from its first (or where the request asks, see
// position) until the event that ends the job's stream. Each event's id is
// its sequence in the events stream, its type the event type, its data the
// event's JSON as published. Streams end early when closing ends.
func (s *Server) events(closing context.Context, w http.ResponseWriter, r *http.Request) *apiError {
	id := r.PathValue("id")
	if !events.ValidToken(id) {
		return fail(http.StatusBadRequest, CodeInvalidParameter, "id", "a job id is 1-128 characters of [A-Za-z0-9_-]")
	}
	pos, e := parsePosition(r)
	if e != nil {
		return e
	}
	setup, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	route, e := s.routeOfJob(setup, id, r.URL.Query().Get("route"))
	if e != nil {
		return e
	}
	subject := s.ns.Event(route, id)
	if pos.after > 0 {
		// A client resuming after the end is told to stop reconnecting.
		done, err := s.endedBy(setup, route, id, subject, pos.after)
		if err != nil {
			return s.unavailable(err, "reading the events of job "+id)
		}
		if done {
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
	}

	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		return fail(http.StatusTooManyRequests, CodeTooManyStreams, "", fmt.Sprintf("%d event streams are open, the most this server serves", cap(s.slots)))
	}
	cons, err := s.stream.OrderedConsumer(setup, pos.consumer(subject))
	if err != nil {
		return s.unavailable(err, "following the events of job "+id)
	}
	it, err := cons.Messages()
	if err != nil {
		return s.unavailable(err, "following the events of job "+id)
	}
	defer it.Stop()

	ctx, stop := context.WithTimeout(r.Context(), s.cfg.MaxStreamDuration)
	defer stop()
	defer context.AfterFunc(closing, stop)()
	sse := startSSE(w, s.cfg.WriteTimeout)
	if sse.flush() == nil {
		s.pump(ctx, sse, it, tenant.From(r.Context()), route, id)
	}
	return nil
}

// position is where a client asks an event stream to start: after the
// Last-Event-ID header's event, else at the since parameter's time, else at
// the job's first event.
type position struct {
	after uint64
	since time.Time
}

func parsePosition(r *http.Request) (position, *apiError) {
	var p position
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return p, fail(http.StatusBadRequest, CodeInvalidParameter, "Last-Event-ID", "must be an event id this stream sent (a number)")
		}
		p.after = n
	}
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return p, fail(http.StatusBadRequest, CodeInvalidParameter, "since", "must be an RFC 3339 time such as 2026-11-29T15:04:05Z")
		}
		p.since = t
	}
	return p, nil
}

// consumer returns the ordered consumer that reads subject from p.
func (p position) consumer(subject string) jetstream.OrderedConsumerConfig {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}}
	switch {
	case p.after > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, p.after+1
	case !p.since.IsZero():
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &p.since
	}
	return cfg
}

// routeOfJob returns the route of the job's events: the one the request
// names, else the job record's (another app's job is no job). A stream of
// another app's job opened by its route is one of an id without a record
// yet: pump sends none of its events.
func (s *Server) routeOfJob(ctx context.Context, id, route string) (string, *apiError) {
	if route != "" {
		switch {
		case !events.ValidToken(route):
			return "", fail(http.StatusBadRequest, CodeInvalidParameter, "route", "a route name is 1-128 characters of [A-Za-z0-9_-]")
		case !s.knownRoute(route):
			return "", fail(http.StatusNotFound, CodeUnknownRoute, "route", fmt.Sprintf("no route named %q", route))
		}
		return route, nil
	}
	j, e := s.job(ctx, id)
	if e != nil {
		if e.detail.Code == CodeJobNotFound {
			e.detail.Message += "; to follow a submission ingest has not taken yet, name its route (?route=)"
		}
		return "", e
	}
	return j.Route, nil
}

// endedBy reports whether the job's event stream ended at or before the
// events stream sequence after: its last event is at most that far and ends
// the stream.
func (s *Server) endedBy(ctx context.Context, route, id, subject string, after uint64) (bool, error) {
	last, err := s.stream.GetLastMsgForSubject(ctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	case err != nil:
		return false, err
	case last.Sequence > after:
		return false, nil
	}
	ev, err := events.DecodeEvent(last.Data)
	if err != nil {
		return false, nil
	}
	return s.ends(ctx, route, id, ev), nil
}

// pump writes the job's events until the one that ends the stream, the
// client leaves, or ctx ends; it sends a comment when idle for KeepAlive.
// It skips the events of a job v may not see: a stream opened by route
// (before a record exists, or of another app's job) sends only v's own
// job's, and another app's job looks like an id that never gets any.
func (s *Server) pump(ctx context.Context, sse *sseWriter, it jetstream.MessagesContext, v tenant.Viewer, route, id string) {
	log := s.log.With().Str(logkey.Route, route).Str(logkey.JobID, id).Logger()
	var seen uint64 // the highest job seq sent
	for {
		wait, cancel := context.WithTimeout(ctx, s.cfg.KeepAlive)
		msg, err := it.Next(jetstream.NextContext(wait))
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, context.DeadlineExceeded):
			if sse.comment("keep-alive") != nil {
				return
			}
			continue
		case err != nil:
			log.Warn().Err(err).Msg("event stream broken")
			return
		}
		md, err := msg.Metadata()
		if err != nil {
			log.Warn().Err(err).Msg("event without metadata; skipped")
			continue
		}
		ev, err := events.DecodeEvent(msg.Data())
		if err == nil && !events.ValidToken(ev.Type) {
			err = fmt.Errorf("event type %q", ev.Type)
		}
		if err != nil {
			log.Warn().Err(err).Uint64(logkey.StreamSeq, md.Sequence.Stream).Msg("undecodable event; skipped")
			continue
		}
		if ev.Job != nil && !v.Sees(ev.Job) {
			continue
		}
		if ev.Seq > 0 && ev.Seq <= seen {
			continue // a republished duplicate
		}
		seen = max(seen, ev.Seq)
		if sse.event(md.Sequence.Stream, ev.Type, msg.Data()) != nil {
			return
		}
		if s.ends(ctx, route, id, ev) {
			return
		}
	}
}

// ends reports whether ev is the last event of the job's stream: its
// terminal event, or the rejection of a submission that made no job.
func (s *Server) ends(ctx context.Context, route, id string, ev *events.Event) bool {
	if ev.Type != events.EventRejected {
		return ev.State.Terminal()
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	j, err := s.jobs.Get(ctx, id)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return true
	case err != nil:
		return false // keep following; the client can always leave
	}
	return j.Route != route
}

// startSSE answers 200 with an event stream, each write bounded by
// timeout.
func startSSE(w http.ResponseWriter, timeout time.Duration) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // tell proxies not to buffer the stream
	w.WriteHeader(http.StatusOK)
	return &sseWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// sseWriter writes Server-Sent Events, each under its own write deadline.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     bytes.Buffer
}

func (s *sseWriter) event(id uint64, typ string, data []byte) error {
	s.buf.Reset()
	if id > 0 {
		fmt.Fprintf(&s.buf, "id: %d\n", id)
	}
	fmt.Fprintf(&s.buf, "event: %s\n", typ)
	// Events are published as one line of JSON; split defensively anyway.
	for line := range bytes.Lines(data) {
		s.buf.WriteString("data: ")
		s.buf.Write(bytes.TrimRight(line, "\r\n"))
		s.buf.WriteByte('\n')
	}
	s.buf.WriteByte('\n')
	return s.write()
}

func (s *sseWriter) comment(text string) error {
	s.buf.Reset()
	s.buf.WriteString(": " + text + "\n\n")
	return s.write()
}

func (s *sseWriter) write() error {
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if _, err := s.w.Write(s.buf.Bytes()); err != nil {
		return err
	}
	return s.flush()
}

func (s *sseWriter) flush() error {
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return s.rc.Flush()
}
