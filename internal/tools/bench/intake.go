package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/ingest"
	"github.com/pollux-dev/pollux/internal/services/webhook"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/provider/replicate"
	"github.com/pollux-dev/pollux/pkg/signature"
	"github.com/pollux-dev/pollux/pkg/state"
)

// submitWorkers is the ingest concurrency of the submission measurement,
// and the raw KV Create reference's.
const submitWorkers = 64

// ingest measures submissions per second through ingest (deduplicating
// create, submit to an instant provider, state write, event, armed check)
// against the raw KV Create rate at the same concurrency.
func (r *runner) ingest(ctx context.Context) error {
	return r.withServer(ctx, false, func(s *server, nc *nats.Conn, js jetstream.JetStream) error {
		r.progress("raw KV Create, %d concurrent creators", submitWorkers)
		raw, err := rawCreates(ctx, s, js, 1, submitWorkers, r.cfg.Window)
		if err != nil {
			return err
		}
		r.progress("  %.0f/s, server CPU %.0f µs each", raw.perSecond, raw.cpuPer)
		n := 4 * r.cfg.Jobs
		// Single runs swing by a third on this machine: the plain and the
		// capped runs alternate, and the medians are reported.
		var plains []rate
		var plainCPU, cappedCPU, takes, frees []float64
		var rounds []string
		for range slotRounds {
			plain, _, err := r.submissions(ctx, s, nc, n, "", nil)
			if err != nil {
				return err
			}
			// A running cap the run never reaches: every job takes a
			// slot, and then frees it (as its end would), measured apart.
			capped, free, err := r.submissions(ctx, s, nc, n, "running slots", func(rt *route.Route) {
				rt.Levels = []budget.Level{{Level: events.LevelAccount, Name: "bench", Running: config.MaxRunning}, rt.Levels[0]}
			})
			if err != nil {
				return err
			}
			plains = append(plains, plain)
			plainCPU = append(plainCPU, plain.cpuPer)
			cappedCPU = append(cappedCPU, capped.cpuPer+free)
			takes = append(takes, capped.cpuPer-plain.cpuPer)
			frees = append(frees, free)
			rounds = append(rounds, fmt.Sprintf("%+.0f%%", ((capped.cpuPer+free)/plain.cpuPer-1)*100))
		}
		slices.SortFunc(plains, func(a, b rate) int { return cmp.Compare(a.perSecond, b.perSecond) })
		plain := plains[len(plains)/2]
		r.report.add(Row{Group: "ingest", Name: "submissions/s through ingest (dedupe + create + submit + arm)", Value: plain.perSecond, Unit: "/s",
			Reference: raw.perSecond, Note: fmt.Sprintf("%d workers, instant provider, median of %d rounds; reference: raw KV Create at the same concurrency", submitWorkers, slotRounds)}).
			atLeast(0.25, true, "≥ 0.25 of raw")
		r.report.add(Row{Group: "ingest", Name: "server CPU per submission", Value: median(plainCPU), Unit: "µs", Reference: raw.cpuPer,
			Note: "reference: per raw KV Create"})
		withSlot, without := median(cappedCPU), median(plainCPU)
		r.report.add(Row{Group: "ingest", Name: "cost a running slot adds per job (server CPU: take at submit + free at the end)",
			Value: (withSlot/without - 1) * 100, Unit: "%",
			Note: fmt.Sprintf("%.0f µs per job against %.0f µs without a cap, medians of %d alternating rounds (%s): the take adds %.0f µs to the submission, the free costs %.0f µs",
				withSlot, without, slotRounds, strings.Join(rounds, " "), median(takes), median(frees))}).
			atMost(20, "< 20%")

		three := budget.Limit{Concurrency: submitWorkers}
		levels, _, err := r.submissions(ctx, s, nc, n, "three budget levels", func(rt *route.Route) {
			rt.Levels = []budget.Level{
				{Level: events.LevelGlobal, Submit: three},
				{Level: events.LevelAccount, Name: "bench", Submit: three},
				{Level: events.LevelRoute, Name: rt.Name, Submit: three},
			}
		})
		if err != nil {
			return err
		}
		r.report.add(Row{Group: "ingest", Name: "submissions/s with submit budgets at three levels (global, account, route)", Value: levels.perSecond, Unit: "/s",
			Reference: plain.perSecond, Note: fmt.Sprintf("concurrency %d at each level; server CPU %.0f µs per submission; reference: no budget, same run", submitWorkers, levels.cpuPer)})
		return r.writes(ctx, nc)
	})
}

// slotRounds is how many alternating rounds the running-slot cost is the
// median of.
const slotRounds = 3

// submissions runs ingest over n submissions (with its route changed by
// tune, when set) and returns how fast they went through and the server's
// CPU per submission; with running slots, it then frees every job's slot
// and returns the server's CPU per free.
func (r *runner) submissions(ctx context.Context, s *server, nc *nats.Conn, n int, what string, tune func(*route.Route)) (rate, float64, error) {
	rg, err := openRig(ctx, nc, config.Streams{}, config.Route{Workers: config.Workers{Submit: submitWorkers}}, instant{})
	if err != nil {
		return rate{}, 0, err
	}
	defer func() { _ = rg.close() }()
	if tune != nil {
		tune(rg.route)
	}
	r.progress("publishing %d submissions", n)
	w := &pubWindow{js: rg.env.JS}
	ids := make([]string, n)
	for i := range n {
		key := fmt.Sprintf("bench-%07d", i)
		ids[i] = events.KeyID(benchRoute, key)
		b, err := json.Marshal(events.Submit{V: events.Version, IdempotencyKey: key, Model: "bench/model", Input: json.RawMessage(`{}`)})
		if err != nil {
			return rate{}, 0, err
		}
		if err := w.publish(ctx, rg.env.NS.Submit(benchRoute), b); err != nil {
			return rate{}, 0, err
		}
	}
	if err := w.flush(ctx); err != nil {
		return rate{}, 0, err
	}
	var done, bad atomic.Int64
	m := rg.env.Metrics.Ingest()
	observe := m.Submission
	m.Submission = func(route, kind, outcome string) {
		observe(route, kind, outcome)
		if outcome == "submitted" {
			done.Add(1)
		} else {
			bad.Add(1)
		}
	}
	svc, err := ingest.New(ingest.Config{Routes: rg.env.Routes, Options: rg.env.Options(), Metrics: m},
		rg.env.JS, rg.env.NS, rg.env.Res, rg.env.Jobs.Intake(), rg.env.Gates)
	if err != nil {
		return rate{}, 0, err
	}
	rg.g.Go(func() error { return svc.Run(rg.ctx) })
	label := "ingest"
	if what != "" {
		label += " with " + what
	}
	r.progress("%s, %d submit workers, instant provider", label, submitWorkers)
	got, err := between(ctx, done.Load, int64(n/10), int64(n*9/10), 5*time.Minute, s)
	if err != nil {
		return rate{}, 0, err
	}
	if b := bad.Load(); b > 0 {
		return rate{}, 0, fmt.Errorf("%d submissions were not submitted", b)
	}
	r.progress("  %.0f/s, server CPU %.0f µs each", got.perSecond, got.cpuPer)
	if _, err := between(ctx, done.Load, int64(n), int64(n), 5*time.Minute, s); err != nil {
		return rate{}, 0, err
	}
	if !rg.route.Capped() {
		return got, 0, nil
	}
	// Each job's slots as its record names them, read before the clock
	// starts: an end has its record in hand.
	slots := make([][]state.Slot, n)
	for i, id := range ids {
		j, err := rg.env.Jobs.Get(ctx, id)
		if err != nil {
			return rate{}, 0, err
		}
		slots[i] = j.Slots
	}
	rel := budget.NewReleaser(rg.env.JS, rg.env.NS)
	if err := rel.Release(ctx, ids[0], slots[0]); err != nil { // finds the stream
		return rate{}, 0, err
	}
	u0, err := s.usage()
	if err != nil {
		return rate{}, 0, err
	}
	var wg sync.WaitGroup
	var next atomic.Int64
	var firstErr atomic.Value
	for range submitWorkers {
		wg.Go(func() {
			for i := int(next.Add(1)); i < n; i = int(next.Add(1)) {
				if err := rel.Release(ctx, ids[i], slots[i]); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	u1, err := s.usage()
	if err != nil {
		return rate{}, 0, err
	}
	if err, _ := firstErr.Load().(error); err != nil {
		return rate{}, 0, err
	}
	free := float64((u1.CPU - u0.CPU).Microseconds()) / float64(n-1)
	r.progress("  freeing a slot: server CPU %.0f µs each", free)
	return got, free, nil
}

// between returns how fast count went from lo to hi, per second, and the
// server's CPU per unit meanwhile.
func between(ctx context.Context, count func() int64, lo, hi int64, limit time.Duration, s *server) (rate, error) {
	deadline := time.Now().Add(limit)
	var t0 time.Time
	var u0 usage
	for {
		c := count()
		if t0.IsZero() && c >= lo {
			t0 = time.Now()
			var err error
			if u0, err = s.usage(); err != nil {
				return rate{}, err
			}
		}
		if c >= hi {
			elapsed := time.Since(t0)
			u1, err := s.usage()
			if err != nil {
				return rate{}, err
			}
			return rate{perSecond: float64(hi-lo) / elapsed.Seconds(), cpuPer: float64((u1.CPU - u0.CPU).Microseconds()) / float64(hi-lo)}, nil
		}
		if time.Now().After(deadline) {
			return rate{}, fmt.Errorf("only %d of %d done within %s", c, hi, limit)
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return rate{}, err
		}
	}
}

// webhookSecret signs the bench's webhook deliveries.
const webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// webhookSenders is how many deliveries are sent at once.
const webhookSenders = 50

// webhook measures signed webhook deliveries per second through the
// receiver (verified, stored in JetStream, answered) and the p99 time to a
// 2xx, from 50 concurrent senders that retry a 503 as providers do.
func (r *runner) webhook(ctx context.Context) error {
	return r.withServer(ctx, false, func(_ *server, nc *nats.Conn, _ jetstream.JetStream) error {
		a, err := replicate.New(provider.Config{Route: benchRoute, Token: simToken, WebhookSecret: webhookSecret})
		if err != nil {
			return err
		}
		rg, err := openRig(ctx, nc, config.Streams{}, config.Route{WebhookURL: "http://127.0.0.1/webhooks/" + benchRoute}, a)
		if err != nil {
			return err
		}
		defer func() { _ = rg.close() }()
		n := r.cfg.Jobs
		if err := rg.seed(ctx, n, time.Hour, remoteID, nil); err != nil {
			return err
		}
		svc, err := webhook.New(webhook.Config{Routes: rg.env.Routes, Options: rg.env.Options(), Metrics: rg.env.Metrics.Webhook()},
			rg.env.JS, rg.env.NS, rg.env.Res, rg.env.Jobs.Webhooks())
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		rg.g.Go(func() error { return svc.Run(rg.ctx, ln) })
		key, err := signature.ParseSecret(webhookSecret)
		if err != nil {
			return err
		}
		url := "http://" + ln.Addr().String() + "/webhooks/" + benchRoute
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: webhookSenders}}
		r.progress("%d signed deliveries from %d senders", n, webhookSenders)
		var next atomic.Int64
		var mu sync.Mutex
		var latencies []time.Duration
		var firstErr error
		start := time.Now()
		var wg sync.WaitGroup
		for range webhookSenders {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= n || ctx.Err() != nil {
						return
					}
					lat, err := deliver(ctx, client, key, url, i)
					mu.Lock()
					if err != nil && firstErr == nil {
						firstErr = err
					}
					latencies = append(latencies, lat)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		if firstErr != nil {
			return firstErr
		}
		slices.Sort(latencies)
		rate := float64(n) / elapsed.Seconds()
		p99 := latencies[len(latencies)*99/100]
		r.progress("  %.0f/s, p99 %s", rate, p99)
		r.report.add(Row{Group: "webhook", Name: "webhook deliveries/s (verified, stored, 2xx)", Value: rate, Unit: "/s",
			Note: fmt.Sprintf("%d senders, each delivery a job's completion", webhookSenders)})
		r.report.add(Row{Group: "webhook", Name: "p99 time to 2xx", Value: float64(p99.Microseconds()) / 1000, Unit: "ms"})
		return nil
	})
}

// deliver sends job i's completion until it is answered 2xx and returns the
// time from the first attempt.
func deliver(ctx context.Context, client *http.Client, key []byte, url string, i int) (time.Duration, error) {
	body := fmt.Appendf(nil, `{"id":"%s","status":"succeeded","output":["https://example.com/%d.mp4"]}`, remoteID(i), i)
	id := "msg_" + strconv.Itoa(i)
	start := time.Now()
	for attempt := 0; ; attempt++ {
		ts := time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"?job="+jobID(i), bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
		req.Header.Set("webhook-signature", signature.Sign(key, id, ts, body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		switch {
		case resp.StatusCode/100 == 2:
			return time.Since(start), nil
		case resp.StatusCode == http.StatusServiceUnavailable && attempt < 10:
			if err := sleep(ctx, time.Duration(50*(attempt+1))*time.Millisecond); err != nil {
				return 0, err
			}
		default:
			return 0, fmt.Errorf("delivery %d answered %d", i, resp.StatusCode)
		}
	}
}
