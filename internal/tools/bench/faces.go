package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// The faces section: a provider face (the Replicate one, as its SDK calls
// it) on the whole stack in-process, as pollux serve runs it, with the
// simulated provider behind it.
//
//   - status answers: GET /replicate/{route}/v1/predictions/{id} at a
//     fixed 2,000 requests a second (open loop: latency counted from when
//     each request was due, so a stall is not hidden), p50 and p99, next
//     to the front door's own GET /v1/jobs/{id} at the same rate, and the
//     most answers a second 32 clients get as fast as they can;
//   - the app check: the same status answers asked with an app's token
//     (the face answers only that app's jobs: tenant.Viewer.Sees) and
//     with an admin's (every app's: no check), the p99 it adds;
//   - the same status answer through the genai, Runway and Luma faces
//     (faces_new.go), each at 2,000 requests a second next to GET
//     /v1/jobs/{id} of the same jobs just before;
//   - fan-out: jobs created through the face and polled every 500 ms (the
//     SDK's interval) by 1 client, then by 50 clients each polling every
//     job: the provider's status calls per completion, the same in both.
const (
	facesJobs      = 500
	facesRate      = 2000
	facesClients   = 50
	facesFanJobs   = 100
	facesPollEvery = 500 * time.Millisecond
	// The tokens of the faces' stack: an app's, whose jobs the bench
	// makes, and an operator's.
	facesAppToken   = "bench-app-token-0123456789"
	facesAdminToken = "bench-admin-token-0123456789"
	facesNewJobs    = 100 // per new face (genai, runway, luma)
)

// bearer sends every request with a front door token.
type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

func (r *runner) faces(ctx context.Context) error {
	tokens, err := frontdoor.ParseTokens(strings.NewReader(facesAppToken + " app=bench\n" + facesAdminToken + " admin\n"))
	if err != nil {
		return err
	}
	return r.withStack(ctx, dev.StackConfig{
		HTTPTokens: tokens,
		Sim:        sim.Config{Seed: 5, TimeScale: 20, Default: sim.Model{QueueMedian: sim.Duration(time.Second), RunMedian: sim.Duration(20 * time.Second), RunSigma: 0.3}},
		Route: config.Route{Workers: config.Workers{Submit: 16, Status: 32}, Faces: []string{"replicate", "genai", "runway", "luma"},
			Poll: config.Poll{MaxDelay: 5 * time.Second}},
		NoWebhooks: true,
	}, func(st *dev.Stack, _ jetstream.JetStream) error {
		base := st.HTTPURL + "/replicate/" + dev.RouteName + "/v1"
		transport := &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}
		client := &http.Client{Transport: bearer{facesAppToken, transport}, Timeout: 30 * time.Second}
		admin := &http.Client{Transport: bearer{facesAdminToken, transport}, Timeout: 30 * time.Second}

		r.progress("%d jobs through the face", facesJobs)
		ids, err := faceCreates(ctx, client, base, "lat", facesJobs)
		if err != nil {
			return err
		}
		if err := faceWaitAll(ctx, client, base, ids, time.Second, 1); err != nil {
			return err
		}

		plain := func(i int) string { return st.HTTPURL + "/v1/jobs/" + ids[i%len(ids)] }
		viaFace := func(i int) string { return base + "/predictions/" + ids[i%len(ids)] }
		window := r.cfg.Window
		r.progress("GET /v1/jobs/{id} at %d/s for %s", facesRate, window)
		pl, err := openLoop(ctx, client, plain, facesRate, window)
		if err != nil {
			return err
		}
		r.progress("GET predictions/{id} through the face at %d/s for %s", facesRate, window)
		fl, err := openLoop(ctx, client, viaFace, facesRate, window)
		if err != nil {
			return err
		}
		r.progress("GET predictions/{id} through the face at %d/s for %s, as an admin (no app check)", facesRate, window)
		al, err := openLoop(ctx, admin, viaFace, facesRate, window)
		if err != nil {
			return err
		}
		r.report.add(Row{Group: "faces", Name: "p99 the app check adds to a face's status answer (ms)", Value: fl.p99 - al.p99, Unit: "ms", Reference: al.p99,
			Note: fmt.Sprintf("open loop at %d/s for %s each: an app's token (its jobs only) p50 %.2f ms, p99 %.2f ms; an admin's (every app, no check) p50 %.2f ms, p99 %.2f ms", facesRate, window, fl.p50, fl.p99, al.p50, al.p99)}).
			atMost(1, "< 1 ms")
		most, err := closedLoop(ctx, client, viaFace, 32, window/2)
		if err != nil {
			return err
		}
		note := fmt.Sprintf("open loop at %d/s for %s, latency from when each request was due; plain: p50 %.2f ms, p99 %.2f ms", facesRate, window, pl.p50, pl.p99)
		r.report.add(Row{Group: "faces", Name: "status answer p99 through the Replicate face (ms)", Value: fl.p99, Unit: "ms", Reference: pl.p99,
			Note: note + fmt.Sprintf("; face p50 %.2f ms; %.0f answers/s served, %d errors", fl.p50, fl.rate, fl.errors)}).
			atMost(pl.p99+5, "< plain + 5 ms")
		r.report.add(Row{Group: "faces", Name: "status answers/s through the face, 32 clients flat out", Value: most, Unit: "/s"})
		if err := r.benchNewFaces(ctx, client, st.HTTPURL, facesNewJobs); err != nil {
			return err
		}

		// Fan-out: the provider's status calls per completion, 1 client vs 50.
		per := map[int]float64{}
		for _, clients := range []int{1, facesClients} {
			before := st.Sim.Stats()
			ids, err := faceCreates(ctx, client, base, fmt.Sprintf("fan%d", clients), facesFanJobs)
			if err != nil {
				return err
			}
			r.progress("%d jobs polled every %s by %d client(s) each", facesFanJobs, facesPollEvery, clients)
			if err := faceWaitAll(ctx, client, base, ids, facesPollEvery, clients); err != nil {
				return err
			}
			after := st.Sim.Stats()
			if after.Creates-before.Creates != len(ids) {
				return fmt.Errorf("%d jobs through the face, %d created", len(ids), after.Creates-before.Creates)
			}
			per[clients] = float64(after.StatusCalls-before.StatusCalls) / float64(len(ids)) // every job ended
		}
		r.report.add(Row{Group: "faces", Name: fmt.Sprintf("provider status calls per completion, %d polling clients", facesClients), Value: per[facesClients], Reference: per[1],
			Note: fmt.Sprintf("reference: 1 client; each client polls every job every %s, as the SDK's wait() does", facesPollEvery)}).
			atMost(per[1]*1.15+0.5, "≈ 1 client's")
		return nil
	})
}

// faceCreates creates n jobs through the Replicate face and returns their
// ids.
func faceCreates(ctx context.Context, c *http.Client, base, prefix string, n int) ([]string, error) {
	ids := make([]string, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			body := fmt.Sprintf(`{"input":{"prompt":"bench %s %d"}}`, prefix, i)
			req, err := http.NewRequestWithContext(gctx, http.MethodPost, base+"/models/bench/video/predictions", strings.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", fmt.Sprintf("%s-%d", prefix, i))
			resp, err := c.Do(req)
			if err != nil {
				return err
			}
			defer func() { _ = resp.Body.Close() }()
			var p struct {
				ID string `json:"id"`
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode/100 != 2 || json.Unmarshal(b, &p) != nil || p.ID == "" {
				return fmt.Errorf("create through the face: %d %s", resp.StatusCode, b)
			}
			ids[i] = p.ID
			return nil
		})
	}
	return ids, g.Wait()
}

// faceWaitAll polls every job through the face, every every, from clients
// clients at once, until each has ended.
func faceWaitAll(ctx context.Context, c *http.Client, base string, ids []string, every time.Duration, clients int) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var left atomic.Int64
	left.Store(int64(len(ids)))
	ended := make([]atomic.Bool, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	for range clients {
		g.Go(func() error {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				all := true
				for i, id := range ids {
					if ended[i].Load() {
						continue
					}
					all = false
					st, err := faceStatus(gctx, c, base, id)
					if err != nil {
						return err
					}
					if st == "succeeded" || st == "failed" || st == "canceled" {
						if !ended[i].Swap(true) {
							left.Add(-1)
						}
					}
				}
				if all || left.Load() == 0 {
					return nil
				}
				select {
				case <-gctx.Done():
					return fmt.Errorf("%d jobs still running: %w", left.Load(), gctx.Err())
				case <-t.C:
				}
			}
		})
	}
	return g.Wait()
}

func faceStatus(ctx context.Context, c *http.Client, base, id string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/predictions/"+id, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	var p struct {
		Status string `json:"status"`
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &p) != nil {
		return "", fmt.Errorf("status through the face: %d %s", resp.StatusCode, b)
	}
	return p.Status, nil
}

// loopResult is an open loop's figures: latency p50 and p99 (ms), the
// answers a second served and the errors.
type loopResult struct {
	p50, p99, rate float64
	errors         int
}

// openLoop sends GETs of url(i) at rate a second for window, each timed
// from when it was due.
func openLoop(ctx context.Context, c *http.Client, url func(i int) string, rate int, window time.Duration) (loopResult, error) {
	n := int(window.Seconds() * float64(rate))
	due := make(chan time.Time, n)
	var mu sync.Mutex
	lat := make([]float64, 0, n)
	var errs atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 128 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for at := range due {
				i := int(next.Add(1))
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url(i), nil)
				if err != nil {
					errs.Add(1)
					continue
				}
				resp, err := c.Do(req)
				if err != nil {
					errs.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs.Add(1)
				}
				d := float64(time.Since(at).Microseconds()) / 1000
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := range n {
		at := start.Add(time.Duration(i) * interval)
		if w := time.Until(at); w > 0 {
			time.Sleep(w)
		}
		due <- at
	}
	close(due)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return loopResult{}, err
	}
	elapsed := time.Since(start).Seconds()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	return loopResult{p50: pct(0.50), p99: pct(0.99), rate: float64(len(lat)) / elapsed, errors: int(errs.Load())}, nil
}

// closedLoop has workers GET url(i) as fast as they can for window and
// returns the answers a second.
func closedLoop(ctx context.Context, c *http.Client, url func(i int) string, workers int, window time.Duration) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	var done, next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url(int(next.Add(1))), nil)
				if err != nil {
					return
				}
				resp, err := c.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(done.Load()) / time.Since(start).Seconds(), nil
}
