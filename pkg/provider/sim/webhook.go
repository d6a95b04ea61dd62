package sim

import (
	"bytes"
	"container/heap"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

// Webhook delivery of a "completed" event: up to webhookMaxAttempts, the
// n-th retry after webhookBackoff·2^(n-1), or after the receiver's
// Retry-After (at most webhookMaxRetryAfter) when it answers 429 or 503.
// A "start" event has a single attempt, as Replicate retries only the
// final webhook.
const (
	webhookMaxAttempts   = 6
	webhookBackoff       = 250 * time.Millisecond
	webhookMaxRetryAfter = 30 * time.Second
	// maxIdleWait bounds how long Run sleeps without re-reading the clock.
	maxIdleWait = time.Second
)

// Log keys.
const (
	logPredictionID = "prediction_id"
	logWebhookID    = "webhook_id"
	logAttempt      = "attempt"
	logCode         = "code"
)

type eventKind int

const (
	eventStart eventKind = iota
	eventCompleted
)

// event is a moment at which a prediction may need a webhook.
type event struct {
	at   time.Time
	seq  uint64
	id   string
	kind eventKind
}

// eventHeap is a min-heap of events by time (then by seq).
type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// delivery is one webhook to send.
type delivery struct {
	predID    string
	msgID     string
	url       string
	body      []byte
	attempts  int  // max attempts per send
	completed bool // a "completed" webhook (marks WebhookSent)
	lateBy    time.Duration
	twice     bool
}

// Run sends webhooks at the moments predictions start and end. Without Run
// the API works but no webhook is sent; events that came due before Run
// are sent when it starts. Run returns nil when ctx is done, after every
// goroutine it started has stopped. Only one Run may be active at a time.
func (s *Server) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("sim: Run is already running")
	}
	defer s.running.Store(false)

	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		if s.ownClient {
			s.client.CloseIdleConnections()
		}
	}()
	timer := time.NewTimer(maxIdleWait)
	defer timer.Stop()
	for {
		now := s.now()
		ds, next := s.due(now)
		for _, d := range ds {
			wg.Go(func() { s.send(ctx, d) })
		}
		wait := maxIdleWait
		if !next.IsZero() {
			wait = min(max(next.Sub(now), 0), maxIdleWait)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-s.wake:
		}
	}
}

// due pops the events due at now and returns the deliveries they need and
// the time of the next event (zero for none).
func (s *Server) due(now time.Time) ([]delivery, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []delivery
	for len(s.events) > 0 && !s.events[0].at.After(now) {
		ev := heap.Pop(&s.events).(event)
		if d, ok := s.fire(ev, now); ok {
			out = append(out, d)
		}
	}
	if len(s.events) == 0 {
		return out, time.Time{}
	}
	return out, s.events[0].at
}

// fire turns an event into a delivery, if one is needed. Call with s.mu
// held.
func (s *Server) fire(ev event, now time.Time) (delivery, bool) {
	p := s.preds[ev.id]
	if p == nil {
		return delivery{}, false
	}
	switch ev.kind {
	case eventStart:
		if p.startHandled {
			return delivery{}, false
		}
		p.startHandled = true
		if snap := p.at(p.startAt); snap.lost || snap.status != StatusProcessing {
			return delivery{}, false // ended or vanished before it started
		}
		return s.newDelivery(p, p.startAt, 1), true
	case eventCompleted:
		if p.doneHandled {
			return delivery{}, false
		}
		end, _, ok := p.terminal()
		if !ok {
			return delivery{}, false
		}
		if end.After(now) { // not yet: a stale event for a changed end
			s.schedule(end, p.id, eventCompleted)
			return delivery{}, false
		}
		p.doneHandled = true
		if p.lostBy(end) {
			return delivery{}, false
		}
		if p.whMissing {
			s.c.webhooksMissing++
			return delivery{}, false
		}
		d := s.newDelivery(p, end, webhookMaxAttempts)
		d.completed = true
		d.twice = p.whDuplicate
		if p.whLate {
			s.c.webhooksLate++
			d.lateBy = time.Duration(s.cfg.Faults.WebhookLateBy)
		}
		return d, true
	}
	return delivery{}, false
}

// newDelivery renders p as it was at t. Call with s.mu held.
func (s *Server) newDelivery(p *prediction, t time.Time, attempts int) delivery {
	body, err := json.Marshal(p.wire(t))
	if err != nil { // cannot happen: the input was valid JSON
		body = []byte(`{"id":"` + p.id + `"}`)
	}
	return delivery{predID: p.id, msgID: "msg_" + newID(), url: p.webhook, body: body, attempts: attempts}
}

// send delivers d (twice for a duplicate), after its lateness.
func (s *Server) send(ctx context.Context, d delivery) {
	if d.lateBy > 0 && !schedule.Sleep(ctx, d.lateBy) {
		return
	}
	s.deliver(ctx, d)
	if d.twice && ctx.Err() == nil {
		s.mu.Lock()
		s.c.webhooksDuplicated++
		s.mu.Unlock()
		s.deliver(ctx, d)
	}
}

// deliver makes up to d.attempts attempts and records the outcome.
func (s *Server) deliver(ctx context.Context, d delivery) {
	log := s.log.With().Str(logPredictionID, d.predID).Str(logWebhookID, d.msgID).Logger()
	for n := 0; n < d.attempts; n++ {
		s.mu.Lock()
		s.c.webhookAttempts++
		if p := s.preds[d.predID]; p != nil {
			p.webhookAttempts++
		}
		s.mu.Unlock()

		code, retryAfter, err := s.post(ctx, d)
		if ctx.Err() != nil {
			return // Run is stopping: neither sent nor failed
		}
		if err == nil && code/100 == 2 {
			s.mu.Lock()
			s.c.webhooksSent++
			if p := s.preds[d.predID]; p != nil && d.completed {
				p.webhookSent = true
			}
			s.mu.Unlock()
			log.Debug().Int(logAttempt, n+1).Int(logCode, code).Msg("webhook delivered")
			return
		}
		log.Debug().Int(logAttempt, n+1).Int(logCode, code).Err(err).Msg("webhook attempt failed")
		if n+1 == d.attempts {
			break
		}
		wait := webhookBackoff << n
		if retryAfter > 0 {
			wait = min(retryAfter, webhookMaxRetryAfter)
		}
		if !schedule.Sleep(ctx, wait) {
			return
		}
	}
	s.mu.Lock()
	s.c.webhooksFailed++
	s.mu.Unlock()
	log.Debug().Msg("webhook given up")
}

// post makes one signed attempt. retryAfter is the receiver's Retry-After
// on a 429 or 503, else 0.
func (s *Server) post(ctx context.Context, d delivery) (code int, retryAfter time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(d.body))
	if err != nil {
		return 0, 0, err
	}
	ts := strconv.FormatInt(s.now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "pollux-sim")
	req.Header.Set("webhook-id", d.msgID)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v1,"+sign(s.secretKey, d.msgID, ts, d.body))
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			retryAfter = time.Duration(secs) * time.Second
		}
	}
	return resp.StatusCode, retryAfter, nil
}

// sign returns the Standard Webhooks v1 signature (without "v1,"):
// base64(HMAC-SHA256(key, id.timestamp.body)).
func sign(key []byte, id, ts string, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
