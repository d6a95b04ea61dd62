package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/platform/tracing"
	"github.com/pollux-dev/pollux/internal/wiring/app"
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
		return r.cycleRows(ctx, "cycles", s, nc, js, 1, true)
	})
}

// cycleRounds is how many alternating raw and poller measurements the
// cycle rates take the median of: single runs of either swing by ±15% on
// this machine, and alternating lets drift hit both alike.
const cycleRounds = 3

// cycleRows measures and reports the raw and poller cycle rates; with
// traced, the poller's with tracing on too, in the same rounds.
func (r *runner) cycleRows(ctx context.Context, group string, s *server, nc *nats.Conn, js jetstream.JetStream, replicas int, traced bool) error {
	streams := config.Streams{Replicas: replicas}
	var raws, polls, rawCPU, pollCPU, ratios, tracedPolls, tracedRatios, spans []float64
	for round := range cycleRounds {
		r.progress("round %d of %d: raw fetch + NakWithDelay cycles, %d messages, %s window", round+1, cycleRounds, r.cfg.Jobs, r.cfg.Window)
		raw, err := rawCycles(ctx, s, js, replicas, r.cfg.Jobs, cycleDelay, 3*time.Second, r.cfg.Window)
		if err != nil {
			return err
		}
		r.progress("  %.0f/s, server CPU %.0f µs each", raw.perSecond, raw.cpuPer)
		r.progress("round %d of %d: poller check cycles, %d jobs, instant provider, %d workers", round+1, cycleRounds, r.cfg.Jobs, statusWorkers)
		polled, err := r.pollerCycles(ctx, s, nc, streams, nil)
		if err != nil {
			return err
		}
		r.progress("  %.0f/s, server CPU %.0f µs each", polled.perSecond, polled.cpuPer)
		if traced {
			r.progress("round %d of %d: poller check cycles with tracing on (a span a poll, discarding exporter)", round+1, cycleRounds)
			t, exported, stop := benchTracer()
			on, err := r.pollerCycles(ctx, s, nc, streams, t)
			if err := errors.Join(err, stop(ctx)); err != nil {
				return err
			}
			r.progress("  %.0f/s, %d spans exported", on.perSecond, exported.spans.Load())
			tracedPolls = append(tracedPolls, on.perSecond)
			tracedRatios = append(tracedRatios, on.perSecond/polled.perSecond)
			spans = append(spans, float64(exported.spans.Load()))
		}
		raws, polls = append(raws, raw.perSecond), append(polls, polled.perSecond)
		rawCPU, pollCPU = append(rawCPU, raw.cpuPer), append(pollCPU, polled.cpuPer)
		ratios = append(ratios, polled.perSecond/raw.perSecond)
	}
	r.progress("raw stateful cycles (+ KV get and compare-and-set of a %d-byte record), %d workers", len(benchRecord), statusWorkers)
	stateful, err := rawStatefulCycles(ctx, s, js, replicas, r.cfg.Jobs, statusWorkers, benchRecord, cycleDelay, 3*time.Second, r.cfg.Window)
	if err != nil {
		return err
	}
	r.progress("  %.0f/s, server CPU %.0f µs each", stateful.perSecond, stateful.cpuPer)
	rounds := make([]string, len(ratios))
	for i, x := range ratios {
		rounds[i] = fmt.Sprintf("%.2f", x)
	}
	poll, raw := median(polls), median(raws)
	r.report.add(Row{Group: group, Name: "check cycles/s through the real poller", Value: poll, Unit: "/s", Reference: raw,
		Note: fmt.Sprintf("instant in-process provider, 1 process, %d workers; median of %d alternating rounds, ratios %s", statusWorkers, cycleRounds, strings.Join(rounds, " "))}).
		atLeast(0.8, true, "≥ 0.8 of raw")
	if traced {
		ratios := make([]string, len(tracedRatios))
		for i, x := range tracedRatios {
			ratios[i] = fmt.Sprintf("%.2f", x)
		}
		r.report.add(Row{Group: group, Name: "check cycles/s through the real poller, tracing on", Value: median(tracedPolls), Unit: "/s", Reference: poll,
			Note: fmt.Sprintf("reference: tracing off (the row above); a span a poll, every one sampled, batched and exported to a discarding exporter (%.0f a round); ratios %s",
				median(spans), strings.Join(ratios, " "))})
	}
	r.report.add(Row{Group: group, Name: "check cycles/s through the real poller, vs raw stateful cycle", Value: poll, Unit: "/s",
		Reference: stateful.perSecond, Note: "reference: fetch + KV get + compare-and-set + NakWithDelay"})
	r.report.add(Row{Group: group, Name: "server CPU per check cycle", Value: median(pollCPU), Unit: "µs", Reference: median(rawCPU),
		Note: "every poll quiet (the provider always says running): no KV; the raw cycle touches no state"})
	r.report.add(Row{Group: group, Name: "server CPU per check cycle, vs raw stateful cycle", Value: median(pollCPU), Unit: "µs", Reference: stateful.cpuPer})
	return nil
}

// pollerCycles runs a poller in this process over Config.Jobs running jobs
// polled every cycleDelay, and returns its status calls per second. With
// t, tracing is on: the jobs have trace contexts, and each poll a span.
func (r *runner) pollerCycles(ctx context.Context, s *server, nc *nats.Conn, streams config.Streams, t *tracing.Tracer) (rate, error) {
	rc := config.Route{
		Workers: config.Workers{Status: statusWorkers},
		Poll:    config.Poll{MinDelay: cycleDelay, MaxDelay: cycleDelay},
	}
	rg, err := openRig(ctx, nc, streams, rc, instant{}, app.WithTracer(t))
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
