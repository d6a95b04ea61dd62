package bench

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/internal/config"
)

// cycleDelay is every job's poll interval in the rate measurements: short
// enough that Config.Jobs jobs ask for more polls than can be made, so the
// rate measured is the capacity.
const cycleDelay = 100 * time.Millisecond

// statusWorkers is the per-process status concurrency of the rate
// measurements.
const statusWorkers = 64

// cycles compares the real poller's check cycle with the engine's raw
// fetch + NakWithDelay cycle on the same server.
func (r *runner) cycles(ctx context.Context) error {
	return r.withServer(ctx, false, func(s *server, nc *nats.Conn, js jetstream.JetStream) error {
		return r.cycleRows(ctx, "cycles", s, nc, js, 1)
	})
}

// cycleRows measures and reports the raw and poller cycle rates.
func (r *runner) cycleRows(ctx context.Context, group string, s *server, nc *nats.Conn, js jetstream.JetStream, replicas int) error {
	r.progress("raw fetch + NakWithDelay cycles, %d messages, %s window", r.cfg.Jobs, r.cfg.Window)
	raw, err := rawCycles(ctx, s, js, replicas, r.cfg.Jobs, cycleDelay, 3*time.Second, r.cfg.Window)
	if err != nil {
		return err
	}
	r.progress("  %.0f/s, server CPU %.0f µs each", raw.perSecond, raw.cpuPer)
	r.progress("raw stateful cycles (+ KV get and compare-and-set of a %d-byte record), %d workers", len(benchRecord), statusWorkers)
	stateful, err := rawStatefulCycles(ctx, s, js, replicas, r.cfg.Jobs, statusWorkers, benchRecord, cycleDelay, 3*time.Second, r.cfg.Window)
	if err != nil {
		return err
	}
	r.progress("  %.0f/s, server CPU %.0f µs each", stateful.perSecond, stateful.cpuPer)
	streams := config.Streams{Replicas: replicas}
	r.progress("poller check cycles, %d jobs, instant provider, %d workers", r.cfg.Jobs, statusWorkers)
	polled, err := r.pollerCycles(ctx, s, nc, streams)
	if err != nil {
		return err
	}
	r.progress("  %.0f/s, server CPU %.0f µs each", polled.perSecond, polled.cpuPer)
	r.report.add(Row{Group: group, Name: "check cycles/s through the real poller", Value: polled.perSecond, Unit: "/s", Reference: raw.perSecond,
		Note: "instant in-process provider, 1 process"}).atLeast(0.5, true, "≥ 0.5 of raw")
	r.report.add(Row{Group: group, Name: "check cycles/s through the real poller, vs raw stateful cycle", Value: polled.perSecond, Unit: "/s",
		Reference: stateful.perSecond, Note: "reference: fetch + KV get + compare-and-set + NakWithDelay"})
	r.report.add(Row{Group: group, Name: "server CPU per check cycle", Value: polled.cpuPer, Unit: "µs", Reference: raw.cpuPer,
		Note: "every poll quiet (the provider always says running): no KV; the raw cycle touches no state"})
	r.report.add(Row{Group: group, Name: "server CPU per check cycle, vs raw stateful cycle", Value: polled.cpuPer, Unit: "µs", Reference: stateful.cpuPer})
	return nil
}

// pollerCycles runs a poller in this process over Config.Jobs running jobs
// polled every cycleDelay, and returns its status calls per second.
func (r *runner) pollerCycles(ctx context.Context, s *server, nc *nats.Conn, streams config.Streams) (rate, error) {
	rc := config.Route{
		Workers: config.Workers{Status: statusWorkers},
		Poll:    config.Poll{MinDelay: cycleDelay, MaxDelay: cycleDelay},
	}
	rg, err := openRig(ctx, nc, streams, rc, instant{})
	if err != nil {
		return rate{}, err
	}
	defer func() { _ = rg.close() }()
	if err := rg.seed(ctx, r.cfg.Jobs, cycleDelay, remoteID, nil); err != nil {
		return rate{}, err
	}
	if err := rg.startPoller(); err != nil {
		return rate{}, err
	}
	out, err := measure(ctx, rg.calls.Load, 3*time.Second, r.cfg.Window, s)
	if err != nil {
		return rate{}, err
	}
	return out, rg.close()
}
