package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/internal/config"
)

// duePerSecond is the poll rate of the capacity runs: however many jobs
// are tracked, their polls are spread so this many come due per second.
const duePerSecond = 2000

// capacityWindow is how long lateness and CPU are measured once polls
// are due.
const capacityWindow = 30 * time.Second

// capacity tracks Config.Sizes jobs at once (and the largest again,
// partitioned) through the real poller, polls spread evenly over time, and
// measures what waiting costs the server and the poller, and how late the
// polls come.
func (r *runner) capacity(ctx context.Context) error {
	runs := make([][2]int, 0, len(r.cfg.Sizes)+1)
	for _, n := range r.cfg.Sizes {
		runs = append(runs, [2]int{n, 1})
	}
	if r.cfg.Partitions > 1 {
		runs = append(runs, [2]int{slices.Max(r.cfg.Sizes), r.cfg.Partitions})
	}
	for _, run := range runs {
		if err := r.capacityRun(ctx, run[0], run[1]); err != nil {
			return err
		}
	}
	return nil
}

// latencies collects durations while on.
type latencies struct {
	mu  sync.Mutex
	on  atomic.Bool
	all []time.Duration
}

func (l *latencies) add(d time.Duration) {
	if !l.on.Load() {
		return
	}
	l.mu.Lock()
	l.all = append(l.all, d)
	l.mu.Unlock()
}

// quantiles returns the p-quantiles of what was collected.
func (l *latencies) quantiles(ps ...float64) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	slices.Sort(l.all)
	out := make([]time.Duration, len(ps))
	if len(l.all) == 0 {
		return out
	}
	for i, p := range ps {
		out[i] = l.all[min(len(l.all)-1, int(p*float64(len(l.all))))]
	}
	return out
}

func (l *latencies) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

func (r *runner) capacityRun(ctx context.Context, n, parts int) error {
	label := fmt.Sprintf("%dk tracked", n/1000)
	if parts > 1 {
		label += fmt.Sprintf(", %d partitions", parts)
	}
	return r.withServer(ctx, false, func(s *server, nc *nats.Conn, _ jetstream.JetStream) error {
		spread := time.Duration(n) * time.Second / duePerSecond
		rc := config.Route{
			Workers:    config.Workers{Status: statusWorkers},
			Poll:       config.Poll{MinDelay: spread, MaxDelay: spread},
			Partitions: parts,
		}
		rg, err := openRig(ctx, nc, config.Streams{}, rc, instant{})
		if err != nil {
			return err
		}
		defer func() { _ = rg.close() }()
		late := &latencies{}
		rg.lateness = late.add
		before, err := s.usage()
		if err != nil {
			return err
		}
		// The first polls come due once every check is armed and waiting:
		// seeding runs at ~20k jobs/s, the first delivery of every check
		// (which puts it to sleep) at ~20k/s more.
		lead := time.Duration(n/5000)*time.Second + 10*time.Second
		base := time.Now().Add(lead)
		r.progress("%s: seeding, first polls due in %s, then %d/s", label, lead.Round(time.Second), duePerSecond)
		err = seed(ctx, rg.env.JS, rg.env.NS, rg.env.Res, benchRoute, n,
			func(i int) time.Time { return base.Add(spread * time.Duration(i) / time.Duration(n)) }, remoteID,
			func(done int) {
				if done%100_000 == 0 {
					r.progress("  %d seeded", done)
				}
			}, false)
		if err != nil {
			return err
		}
		heap0 := heapInUse()
		if err := rg.startPoller(); err != nil {
			return err
		}
		if time.Now().After(base) {
			r.progress("  seeding outlasted the lead; lateness includes the backlog")
		}
		if err := sleep(ctx, time.Until(base)); err != nil {
			return err
		}
		waiting, err := s.usage()
		if err != nil {
			return err
		}
		heap1 := heapInUse()
		if err := sleep(ctx, 5*time.Second); err != nil { // past the start
			return err
		}
		u0, err := s.usage()
		if err != nil {
			return err
		}
		late.on.Store(true)
		t0, calls0 := time.Now(), rg.calls.Load()
		if err := sleep(ctx, capacityWindow); err != nil {
			return err
		}
		late.on.Store(false)
		u1, err := s.usage()
		if err != nil {
			return err
		}
		elapsed := time.Since(t0)
		polls := float64(rg.calls.Load()-calls0) / elapsed.Seconds()
		q := late.quantiles(0.5, 0.99)
		cpu := 100 * (u1.CPU - u0.CPU).Seconds() / elapsed.Seconds()
		r.progress("  server +%d MB, CPU %.0f%%, %.0f polls/s, lateness p50 %s p99 %s",
			(waiting.RSS-before.RSS)>>20, cpu, polls, q[0], q[1])
		g := "capacity"
		r.report.add(Row{Group: g, Name: label + ": server memory per tracked job", Value: float64(waiting.RSS-before.RSS) / float64(n), Unit: "B",
			Note: "RSS growth: job record, check message, pending entry"})
		r.report.add(Row{Group: g, Name: label + ": poller memory per tracked job", Value: float64(heap1-heap0) / float64(n), Unit: "B",
			Note: "Go heap in use"})
		r.report.add(Row{Group: g, Name: label + ": server CPU while the checks wait", Value: cpu, Unit: "% of a core",
			Note: fmt.Sprintf("%.0f polls/s due and made", polls)})
		r.report.add(Row{Group: g, Name: label + ": poll lateness p50", Value: ms(q[0]), Unit: "ms"})
		row := r.report.add(Row{Group: g, Name: label + ": poll lateness p99", Value: ms(q[1]), Unit: "ms",
			Note: fmt.Sprintf("%d polls", late.count())})
		if n == 100_000 && parts == 1 {
			row.atMost(250, "< 250 ms")
		}
		return nil
	})
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
