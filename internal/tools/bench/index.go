package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/internal/edge/index"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// indexJobs is how many jobs the index section puts in the events stream.
const indexJobs = 100_000

// indexQueries is how many pages and searches the index section times.
const indexQueries = 2000

// indexRoutes are the routes of the index section's jobs.
var indexRoutes = []string{"replicate", "fal", "runway", "luma"}

// index measures the jobs index (internal/edge/index): 100,000 jobs' events in
// the stream, the time to replay them into a fresh index, the time of a
// page filtered by route and state and of a search, the memory per job,
// and the writes building the index made (none).
func (r *runner) index(ctx context.Context) error {
	return r.withServer(ctx, false, func(_ *server, _ *nats.Conn, js jetstream.JetStream) error {
		ns := events.Default
		res, err := ns.Setup(ctx, js, events.Options{})
		if err != nil {
			return err
		}
		n := indexJobs
		r.progress("%d jobs' events into the events stream", n)
		published, err := publishIndexEvents(ctx, js, ns, n)
		if err != nil {
			return err
		}
		writes0, err := streamWrites(ctx, js)
		if err != nil {
			return err
		}

		heap0 := heapInUse()
		x, err := index.New(index.Config{}, js, ns, res)
		if err != nil {
			return err
		}
		rctx, stop := context.WithCancel(ctx)
		ready, done := make(chan struct{}), make(chan error, 1)
		start, replayCPU := time.Now(), processCPU()
		go func() { done <- x.Run(rctx, ready) }()
		select {
		case <-ready:
		case err := <-done:
			stop()
			return fmt.Errorf("index: Run returned before it caught up: %w", err)
		case <-ctx.Done():
			stop()
			return errors.Join(ctx.Err(), <-done)
		}
		replay, replayCPU := time.Since(start), processCPU()-replayCPU
		heap1 := heapInUse()
		held, approx := x.Size()
		r.progress("  replayed %d events in %s: %d jobs, heap +%d MB", published, replay.Round(time.Millisecond), held, (heap1-heap0)>>20)

		rnd := rand.New(rand.NewPCG(18, 1))
		cpu0 := processCPU()
		pages, err := timePages(x, rnd)
		pageCPU := (processCPU() - cpu0) / time.Duration(max(len(pages), 1))
		if err != nil {
			stop()
			return errors.Join(err, <-done)
		}
		recent, err := timeRecentPages(x, rnd, time.Now())
		if err != nil {
			stop()
			return errors.Join(err, <-done)
		}
		searches, err := timeSearches(x, rnd, n)
		stop()
		if rerr := <-done; err == nil {
			err = rerr
		}
		if err != nil {
			return err
		}
		writes1, err := streamWrites(ctx, js)
		if err != nil {
			return err
		}
		runtime.KeepAlive(x)

		pq, sq, tq := p50p99(pages), p50p99(searches), p50p99(recent)
		r.progress("  page p50 %s p99 %s; search p50 %s p99 %s", pq[0], pq[1], sq[0], sq[1])
		g := "index"
		r.report.add(Row{Group: g, Name: "replay of 100k jobs' events into a fresh index", Value: replay.Seconds(), Unit: "s",
			Note: fmt.Sprintf("%d events, %.0f events/s, %.1f s of CPU in this process, %s", published, float64(published)/replay.Seconds(), replayCPU.Seconds(), loadAverage())})
		r.report.add(Row{Group: g, Name: "page filtered by route and state p50", Value: us(pq[0]), Unit: "µs",
			Note: fmt.Sprintf("50 jobs, first 5 pages by cursor, %d pages", len(pages))})
		r.report.add(Row{Group: g, Name: "page filtered by route and state p99", Value: us(pq[1]), Unit: "µs",
			Note: "wall time: includes waiting for a CPU, " + loadAverage()}).atMost(5000, "≤ 5 ms")
		r.report.add(Row{Group: g, Name: "page filtered by route and state, CPU per page", Value: us(pageCPU), Unit: "µs",
			Note: "the bench process's CPU over all the pages (GC included), divided"})
		r.report.add(Row{Group: g, Name: "page filtered by route and created in the last 10-60 min p99", Value: us(tq[1]), Unit: "µs",
			Note: fmt.Sprintf("total from the range's bounds in the route's list; p50 %.0f µs", us(tq[0]))})
		r.report.add(Row{Group: g, Name: "search (id, idempotency key, remote id) p50", Value: us(sq[0]), Unit: "µs",
			Note: fmt.Sprintf("%d searches", len(searches))})
		r.report.add(Row{Group: g, Name: "search (id, idempotency key, remote id) p99", Value: us(sq[1]), Unit: "µs",
			Note: "wall time, " + loadAverage()}).atMost(1000, "≤ 1 ms")
		r.report.add(Row{Group: g, Name: "memory per job", Value: float64(heap1-heap0) / float64(held), Unit: "B",
			Note: fmt.Sprintf("Go heap in use; the index's own estimate %d B", approx/int64(max(held, 1)))})
		r.report.add(Row{Group: g, Name: "extra writes per job", Value: float64(writes1-writes0) / float64(n), Unit: "",
			Note: "messages added to every stream and bucket while the index was built and read"}).atMost(0, "0")
		return nil
	})
}

// processCPU returns the CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAverage describes the machine's load (Linux), so that a wall-time
// figure can be read against it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load unknown"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "load unknown"
	}
	return fmt.Sprintf("load average %s on %d CPUs", f[0], runtime.NumCPU())
}

// us converts to microseconds.
func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

// p50p99 returns the p50 and p99 of d (sorted in place).
func p50p99(d []time.Duration) [2]time.Duration {
	if len(d) == 0 {
		return [2]time.Duration{}
	}
	slices.Sort(d)
	return [2]time.Duration{d[len(d)/2], d[len(d)*99/100]}
}

// indexState is the state job i of a route in the index section ends in, by i
// mod 100: 70% succeeded, 8% failed, 2% canceled, 10% running, 10%
// queued.
func indexState(i int) state.State {
	switch p := i % 100; {
	case p < 70:
		return state.Succeeded
	case p < 78:
		return state.Failed
	case p < 80:
		return state.Canceled
	case p < 90:
		return state.Running
	}
	return state.Queued
}

// indexJob is job i of the index section: created 100 ms after job i-1
// (one in 50 a minute earlier, as a late event would be), half with an
// idempotency key.
func indexJob(i int, base time.Time) *state.Job {
	created := base.Add(time.Duration(i) * 100 * time.Millisecond)
	if i%50 == 49 {
		created = created.Add(-time.Minute)
	}
	route := indexRoutes[i%len(indexRoutes)]
	j := &state.Job{
		ID: jobID(i), Route: route, Model: fmt.Sprintf("%s/model-%d", route, i%7), RemoteID: remoteID(i),
		State: state.Queued, ProviderStatus: "starting", CreatedAt: created, SubmittedAt: created, UpdatedAt: created,
		Deadline: created.Add(24 * time.Hour), Metadata: map[string]string{"user": fmt.Sprintf("u%d", i%1000)},
	}
	if i%2 == 0 {
		j.IdempotencyKey = fmt.Sprintf("idem-%07d", i)
	}
	return j
}

// publishIndexEvents publishes the events of n jobs (submitted; running
// unless still queued; the end when it has one) and returns how many.
func publishIndexEvents(ctx context.Context, js jetstream.JetStream, ns events.Namespace, n int) (int, error) {
	base := time.Now().UTC().Add(-time.Duration(n) * 100 * time.Millisecond)
	w := &pubWindow{js: js}
	count := 0
	for i := range n {
		j := indexJob(i, base)
		end := indexState(i / len(indexRoutes))
		steps := []state.State{state.Queued}
		if end != state.Queued {
			steps = append(steps, state.Running)
		}
		if end.Terminal() {
			steps = append(steps, end)
		}
		for k, st := range steps {
			j.State, j.UpdatedAt = st, j.CreatedAt.Add(time.Duration(k)*30*time.Second)
			typ := string(st)
			if k == 0 {
				typ = events.EventSubmitted
			}
			if st.Terminal() {
				j.CompletedAt, j.DetectedAt, j.DetectedBy, j.Polls = j.UpdatedAt.Add(-time.Second), j.UpdatedAt, state.FromPoll, 4
			}
			ev := &events.Event{V: events.Version, Type: typ, Seq: uint64(k + 1), Time: j.UpdatedAt, Route: j.Route, JobID: j.ID, State: st, Job: j}
			b, err := ev.Encode()
			if err != nil {
				return count, err
			}
			if err := w.publish(ctx, ns.Event(j.Route, j.ID), b); err != nil {
				return count, err
			}
			count++
		}
	}
	return count, w.flush(ctx)
}

// streamWrites sums the last sequences of every stream (buckets are
// streams): what was written to the server.
func streamWrites(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	var total uint64
	l := js.ListStreams(ctx)
	for info := range l.Info() {
		total += info.State.LastSeq
	}
	if err := l.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		return 0, err
	}
	return total, nil
}

// timePages times pages filtered by a random route and state: the first
// page and the four after it by cursor.
func timePages(x *index.Index, rnd *rand.Rand) ([]time.Duration, error) {
	states := []state.State{state.Succeeded, state.Failed, state.Running, state.Queued, state.Canceled}
	var out []time.Duration
	for len(out) < indexQueries {
		q := index.Query{Route: indexRoutes[rnd.IntN(len(indexRoutes))], States: []state.State{states[rnd.IntN(len(states))]}}
		for range 5 {
			t := time.Now()
			p, err := x.List(q)
			out = append(out, time.Since(t))
			if err != nil {
				return nil, err
			}
			if len(p.Jobs) == 0 {
				return nil, fmt.Errorf("index: no %v jobs on route %s", q.States, q.Route)
			}
			if q.Cursor = p.Next; q.Cursor == "" {
				break
			}
		}
	}
	return out, nil
}

// timeRecentPages times first pages filtered by route and a creation
// time in the last ten minutes to the last hour: the index keeps no count
// for a time range; it counts the total from the range's bounds in the
// route's list.
func timeRecentPages(x *index.Index, rnd *rand.Rand, newest time.Time) ([]time.Duration, error) {
	out := make([]time.Duration, 0, indexQueries/4)
	for range cap(out) {
		since := time.Duration(10+rnd.IntN(51)) * time.Minute
		q := index.Query{Route: indexRoutes[rnd.IntN(len(indexRoutes))], CreatedAfter: newest.Add(-since)}
		t := time.Now()
		_, err := x.List(q)
		out = append(out, time.Since(t))
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// timeSearches times searches by id, idempotency key and remote id of
// random jobs, each of which must be found.
func timeSearches(x *index.Index, rnd *rand.Rand, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, indexQueries)
	for k := range indexQueries {
		i := rnd.IntN(n)
		s := []string{jobID(i), remoteID(i), fmt.Sprintf("idem-%07d", i&^1)}[k%3]
		t := time.Now()
		p, err := x.List(index.Query{Search: s})
		out = append(out, time.Since(t))
		if err != nil {
			return nil, err
		}
		if len(p.Jobs) != 1 {
			return nil, fmt.Errorf("index: search %q found %d jobs", s, len(p.Jobs))
		}
	}
	return out, nil
}
