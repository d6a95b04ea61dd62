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

	"github.com/pollux-dev/pollux/internal/platform/config"
)

// duePerSecond is the poll rate of the capacity runs: however many jobs
// are tracked, their polls are spread so this many come due per second.
const duePerSecond = 2000

// capacityWindow is how long lateness and CPU are measured once polls
// are due: longer than the file store's periodic write of a stream's
// whole state (every 2-2.5 minutes; with a million checks it holds up the
// checks stream for a moment), so every window sees one.
const capacityWindow = 150 * time.Second

// capacitySlice is how often a capacity run reports the polls of the
// last slice of its window.
const capacitySlice = 10 * time.Second

// nearShare and nearWindow make the capacity section's workload mix: that
// share of the tracked jobs is due within the window, the rest minutes
// away (spread over the rest of the poll interval).
const (
	nearShare  = 0.2
	nearWindow = time.Minute
)

// capacityCase is one capacity run.
type capacityCase struct {
	n, parts int
	// mix: nearShare of the jobs due within nearWindow (else every job's
	// first poll spread evenly over the poll interval).
	mix bool
	// parkAfter is the streams' park_after (negative: parking off; 0:
	// the default).
	parkAfter time.Duration
	// replicas > 1 runs on a three-node cluster, everything replicated.
	replicas int
}

func (c capacityCase) label() string {
	l := fmt.Sprintf("%dk tracked", c.n/1000)
	if c.parts > 1 {
		l += fmt.Sprintf(", %d partitions", c.parts)
	}
	if c.mix {
		l += fmt.Sprintf(", %.0f%% due within %s", 100*nearShare, nearWindow)
	}
	switch {
	case c.parkAfter < 0:
		l += ", parking off"
	case c.parkAfter > 0:
		l += fmt.Sprintf(", park_after %s", c.parkAfter)
	}
	if c.replicas > 1 {
		l = fmt.Sprintf("cluster R%d, ", c.replicas) + l
	}
	return l
}

// capacity tracks Config.Sizes jobs at once through the real poller, with
// the checks parked as they are by default: polls spread evenly over time
// at every size; at the smallest size also the workload mix, the same
// with parking off (every check nak-delayed in the consumer, as before
// parking) and partitioned. It measures what waiting costs the server and
// the poller, and how late the polls come.
func (r *runner) capacity(ctx context.Context) error {
	var runs []capacityCase
	for _, n := range r.cfg.Sizes {
		runs = append(runs, capacityCase{n: n, parts: 1})
	}
	small := slices.Min(r.cfg.Sizes)
	runs = append(runs, capacityCase{n: small, parts: 1, mix: true}, capacityCase{n: small, parts: 1, parkAfter: -1})
	for _, c := range runs {
		if err := r.capacityRun(ctx, c); err != nil {
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

// since returns the p-quantiles of what was collected from the i-th
// entry on, and how many were collected.
func (l *latencies) since(i int, ps ...float64) ([]time.Duration, int) {
	l.mu.Lock()
	part := slices.Clone(l.all[min(i, len(l.all)):])
	n := len(l.all)
	l.mu.Unlock()
	slices.Sort(part)
	out := make([]time.Duration, len(ps))
	for k, p := range ps {
		if len(part) > 0 {
			out[k] = part[min(len(part)-1, int(p*float64(len(part))))]
		}
	}
	return out, n
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

func (r *runner) capacityRun(ctx context.Context, c capacityCase) error {
	n, label := c.n, c.label()
	return r.withServer(ctx, c.replicas > 1, func(s *server, nc *nats.Conn, _ jetstream.JetStream) error {
		spread := time.Duration(n) * time.Second / duePerSecond
		rc := config.Route{
			Workers:    config.Workers{Status: statusWorkers},
			Poll:       config.Poll{MinDelay: spread, MaxDelay: spread},
			Partitions: c.parts,
		}
		rg, err := openRig(ctx, nc, config.Streams{ParkAfter: c.parkAfter, Replicas: c.replicas}, rc, instant{})
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
		nodes0, err := s.nodeUsage()
		if err != nil {
			return err
		}
		// The first polls come due once every check is armed and waiting:
		// seeding runs at ~20k jobs/s, the first delivery of every check
		// (which parks it, or puts it to sleep) at ~10k/s more.
		lead := time.Duration(n/4000)*time.Second + 20*time.Second
		if c.replicas > 1 {
			lead = time.Duration(n/2000)*time.Second + 20*time.Second // every write replicated
		}
		base := time.Now().Add(lead)
		due := func(i int) time.Time { return base.Add(spread * time.Duration(i) / time.Duration(n)) }
		if c.mix {
			near := int(nearShare * float64(n))
			due = func(i int) time.Time {
				if i < near {
					return base.Add(nearWindow * time.Duration(i) / time.Duration(near))
				}
				return base.Add(nearWindow + (spread-nearWindow)*time.Duration(i-near)/time.Duration(n-near))
			}
		}
		r.progress("%s: seeding, first polls due in %s", label, lead.Round(time.Second))
		err = seed(ctx, rg.env.JS, rg.env.NS, rg.env.Res, benchRoute, n, due, remoteID,
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
		nodes1, err := s.nodeUsage()
		if err != nil {
			return err
		}
		heap1 := heapInUse()
		pending, err := ackPending(ctx, rg)
		if err != nil {
			return err
		}
		if err := sleep(ctx, 5*time.Second); err != nil { // past the start
			return err
		}
		u0, err := s.usage()
		if err != nil {
			return err
		}
		w0, err := s.nodeUsage()
		if err != nil {
			return err
		}
		late.on.Store(true)
		t0, calls0 := time.Now(), rg.calls.Load()
		for prev := 0; time.Since(t0) < capacityWindow; {
			if err := sleep(ctx, min(capacitySlice, capacityWindow-time.Since(t0))); err != nil {
				return err
			}
			q, n := late.since(prev, 0.99, 1)
			r.progress("  +%s: %d polls, lateness p99 %s, max %s", time.Since(t0).Round(time.Second), n-prev, q[0], q[1])
			prev = n
		}
		late.on.Store(false)
		u1, err := s.usage()
		if err != nil {
			return err
		}
		w1, err := s.nodeUsage()
		if err != nil {
			return err
		}
		elapsed := time.Since(t0)
		polls := float64(rg.calls.Load()-calls0) / elapsed.Seconds()
		q := late.quantiles(0.5, 0.99)
		cpu := 100 * (u1.CPU - u0.CPU).Seconds() / elapsed.Seconds()
		perPoll := (u1.CPU - u0.CPU).Seconds() / max(1, float64(rg.calls.Load()-calls0)) * 1e6
		r.progress("  server +%d MB, %d checks in the consumer, CPU %.0f%% (%.0f µs a poll), %.0f polls/s, lateness p50 %s p99 %s",
			(waiting.RSS-before.RSS)>>20, pending, cpu, perPoll, polls, q[0], q[1])
		g := "capacity"
		r.report.add(Row{Group: g, Name: label + ": server memory per tracked job", Value: float64(waiting.RSS-before.RSS) / float64(n), Unit: "B",
			Note: "RSS growth: job record, check message, pending entry or schedule"})
		r.report.add(Row{Group: g, Name: label + ": poller memory per tracked job", Value: float64(heap1-heap0) / float64(n), Unit: "B",
			Note: "Go heap in use"})
		r.report.add(Row{Group: g, Name: label + ": checks waiting in the consumer", Value: float64(pending), Unit: "",
			Note: "ack-pending as polls begin; the rest are parked"})
		r.report.add(Row{Group: g, Name: label + ": server CPU while the checks wait", Value: cpu, Unit: "% of a core",
			Note: fmt.Sprintf("%d polls/s due, %.0f/s made", duePerSecond, polls)})
		cpuRow := r.report.add(Row{Group: g, Name: label + ": server CPU per poll", Value: perPoll, Unit: "µs"})
		r.report.add(Row{Group: g, Name: label + ": poll lateness p50", Value: ms(q[0]), Unit: "ms"})
		row := r.report.add(Row{Group: g, Name: label + ": poll lateness p99", Value: ms(q[1]), Unit: "ms",
			Note: fmt.Sprintf("%d polls", late.count())})
		if len(nodes0) > 1 {
			for i := range nodes0 {
				name := fmt.Sprintf("%s: node %d", label, i+1)
				r.report.add(Row{Group: g, Name: name + ": server CPU", Value: 100 * (w1[i].CPU - w0[i].CPU).Seconds() / elapsed.Seconds(),
					Unit: "% of a core"})
				r.report.add(Row{Group: g, Name: name + ": server memory per tracked job", Value: float64(nodes1[i].RSS-nodes0[i].RSS) / float64(n),
					Unit: "B"})
			}
		}
		switch {
		case c.parkAfter != 0 || c.parts > 1 || c.mix || c.replicas > 1:
		case n >= 3_000_000:
			row.atMost(1000, "< 1 s")
		case n >= 1_000_000:
			row.atMost(250, "< 250 ms")
			cpuRow.atMost(250, "≤ 250 µs")
		}
		return nil
	})
}

// ackPending is how many checks wait ack-pending in the rig's poller
// consumers.
func ackPending(ctx context.Context, rg *rig) (int, error) {
	total := 0
	for name := range rg.env.Res.Checks.ConsumerNames(ctx).Name() {
		c, err := rg.env.Res.Checks.Consumer(ctx, name)
		if err != nil {
			return 0, err
		}
		ci, err := c.Info(ctx)
		if err != nil {
			return 0, err
		}
		total += ci.NumAckPending
	}
	return total, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
