package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

// rawCycles is the engine's own check cycle, with nothing of Pollux: n
// messages on a work-queue stream and one durable consumer whose every
// delivery is nak'd with delay at once (a Consume callback). It returns
// deliveries per second over window, after warm.
func rawCycles(ctx context.Context, s *server, js jetstream.JetStream, replicas, n int, delay, warm, window time.Duration) (rate, error) {
	const name = "BENCH_RAW"
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{"bench.raw.>"}, Retention: jetstream.WorkQueuePolicy, Replicas: replicas,
	})
	if err != nil {
		return rate{}, fmt.Errorf("raw cycles: %w", err)
	}
	defer func() { _ = js.DeleteStream(context.WithoutCancel(ctx), name) }()
	if err := publishN(ctx, js, n, func(i int) string { return fmt.Sprintf("bench.raw.%d", i) }, []byte(`{"v":1,"job_id":"bench-0000000"}`)); err != nil {
		return rate{}, err
	}
	c, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		MaxAckPending: -1, MaxDeliver: -1, Replicas: replicas,
	})
	if err != nil {
		return rate{}, fmt.Errorf("raw cycles: %w", err)
	}
	var count atomic.Int64
	cc, err := c.Consume(func(m jetstream.Msg) {
		count.Add(1)
		_ = m.NakWithDelay(delay)
	}, jetstream.PullMaxMessages(500))
	if err != nil {
		return rate{}, fmt.Errorf("raw cycles: %w", err)
	}
	defer cc.Stop()
	return measure(ctx, count.Load, warm, window, s)
}

// rawCreates is the engine's KV Create rate: workers goroutines creating
// new keys with one synchronous round trip each, for window.
func rawCreates(ctx context.Context, s *server, js jetstream.JetStream, replicas, workers int, window time.Duration) (rate, error) {
	const name = "bench-raw"
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, Replicas: replicas})
	if err != nil {
		return rate{}, fmt.Errorf("raw creates: %w", err)
	}
	defer func() { _ = js.DeleteKeyValue(context.WithoutCancel(ctx), name) }()
	var count atomic.Int64
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := 0; ; i++ {
				_, err := kv.Create(wctx, fmt.Sprintf("k%d-%d", w, i), []byte(`{"id":"bench"}`))
				if wctx.Err() != nil {
					errs <- nil
					return
				}
				if err != nil {
					errs <- err
					return
				}
				count.Add(1)
			}
		}()
	}
	got, merr := measure(ctx, count.Load, time.Second, window, s)
	cancel()
	all := []error{merr}
	for range workers {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		return rate{}, fmt.Errorf("raw creates: %w", err)
	}
	return got, nil
}

// publishN publishes n messages asynchronously with a bounded window.
func publishN(ctx context.Context, js jetstream.JetStream, n int, subject func(i int) string, data []byte) error {
	w := &pubWindow{js: js}
	for i := range n {
		if err := w.publish(ctx, subject(i), data); err != nil {
			return err
		}
	}
	return w.flush(ctx)
}

// pubWindow publishes asynchronously with at most seedWindow
// acknowledgements outstanding, and reports the first failure.
type pubWindow struct {
	js      jetstream.JetStream
	futures []jetstream.PubAckFuture
}

// seedWindow bounds the asynchronous publishes in flight.
const seedWindow = 2000

func (w *pubWindow) publish(ctx context.Context, subject string, data []byte, opts ...jetstream.PublishOpt) error {
	f, err := w.js.PublishAsync(subject, data, opts...)
	if err != nil {
		return fmt.Errorf("publish %s: %w", subject, err)
	}
	w.futures = append(w.futures, f)
	if len(w.futures) >= seedWindow {
		return w.flush(ctx)
	}
	return nil
}

func (w *pubWindow) flush(ctx context.Context) error {
	select {
	case <-w.js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return errors.New("publish acknowledgements not received within 30s")
	}
	for _, f := range w.futures {
		select {
		case err := <-f.Err():
			return fmt.Errorf("publish %s: %w", f.Msg().Subject, err)
		default:
		}
	}
	w.futures = w.futures[:0]
	return nil
}

// rate is a measured rate and what the server spent on it.
type rate struct {
	perSecond float64
	// cpuPer is the server's CPU time per unit (µs), when measured.
	cpuPer float64
}

// measure waits warm, then returns how much count grew per second over
// window and, when s is not nil, the server's CPU per unit meanwhile.
func measure(ctx context.Context, count func() int64, warm, window time.Duration, s *server) (rate, error) {
	if err := sleep(ctx, warm); err != nil {
		return rate{}, err
	}
	var u0, u1 usage
	var err error
	if s != nil {
		if u0, err = s.usage(); err != nil {
			return rate{}, err
		}
	}
	a, t0 := count(), time.Now()
	if err := sleep(ctx, window); err != nil {
		return rate{}, err
	}
	b, elapsed := count(), time.Since(t0)
	out := rate{perSecond: float64(b-a) / elapsed.Seconds()}
	if s != nil {
		if u1, err = s.usage(); err != nil {
			return rate{}, err
		}
		if b > a {
			out.cpuPer = float64((u1.CPU - u0.CPU).Microseconds()) / float64(b-a)
		}
	}
	return out, nil
}

// sleep waits d; ctx's error when it ended first.
func sleep(ctx context.Context, d time.Duration) error {
	if !schedule.Sleep(ctx, d) {
		return ctx.Err()
	}
	return nil
}

// rawStatefulCycles is the engine's own stateful check cycle: like
// rawCycles, but each delivery also reads a record of the size of a job's
// from a KV bucket and writes it back with compare-and-set before the nak,
// workers at a time, as the poller does. It is what any poller that keeps
// per-job state in KV cannot beat on this server.
func rawStatefulCycles(ctx context.Context, s *server, js jetstream.JetStream, replicas, n, workers int, record []byte, delay, warm, window time.Duration) (rate, error) {
	const name, bucket = "BENCH_RAWS", "bench-raws"
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{"bench.raws.>"}, Retention: jetstream.WorkQueuePolicy, Replicas: replicas,
	})
	if err != nil {
		return rate{}, fmt.Errorf("raw stateful cycles: %w", err)
	}
	defer func() { _ = js.DeleteStream(context.WithoutCancel(ctx), name) }()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, Replicas: replicas})
	if err != nil {
		return rate{}, fmt.Errorf("raw stateful cycles: %w", err)
	}
	defer func() { _ = js.DeleteKeyValue(context.WithoutCancel(ctx), bucket) }()
	w := &pubWindow{js: js}
	for i := range n {
		if err := w.publish(ctx, "$KV."+bucket+"."+strconv.Itoa(i), record); err != nil {
			return rate{}, err
		}
		if err := w.publish(ctx, "bench.raws."+strconv.Itoa(i), nil); err != nil {
			return rate{}, err
		}
	}
	if err := w.flush(ctx); err != nil {
		return rate{}, err
	}
	c, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "raws", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		MaxAckPending: -1, MaxDeliver: -1, Replicas: replicas,
	})
	if err != nil {
		return rate{}, fmt.Errorf("raw stateful cycles: %w", err)
	}
	it, err := c.Messages(jetstream.PullMaxMessages(workers))
	if err != nil {
		return rate{}, err
	}
	defer it.Stop()
	var count atomic.Int64
	var lastErr atomic.Value // the latest failure, for a run that had no success
	sem := make(chan struct{}, workers)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			m, err := it.Next(jetstream.NextContext(cctx))
			if cctx.Err() != nil {
				return
			}
			if err != nil { // a missed heartbeat, a reconnect: the iterator goes on
				lastErr.Store(fmt.Errorf("next message: %w", err))
				time.Sleep(10 * time.Millisecond)
				continue
			}
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				key := strings.TrimPrefix(m.Subject(), "bench.raws.")
				e, err := kv.Get(cctx, key)
				if err == nil {
					_, err = kv.Update(cctx, key, e.Value(), e.Revision())
				}
				if err == nil {
					count.Add(1)
				} else {
					lastErr.Store(fmt.Errorf("read and write %s: %w", key, err))
				}
				_ = m.NakWithDelay(delay)
			}()
		}
	}()
	out, err := measure(ctx, count.Load, warm, window, s)
	if err == nil && out.perSecond == 0 {
		// A reference of 0 would print as none: say why instead.
		err = fmt.Errorf("raw stateful cycles: not one cycle in %s (latest failure: %v)", window, lastErr.Load())
	}
	return out, err
}
