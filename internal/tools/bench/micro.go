package bench

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/edge/tenant"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/schedule"
	"github.com/pollux-dev/pollux/pkg/state"
)

// micro measures the per-decision costs with the standard benchmark
// harness: one schedule decision (cold start, and with learned
// durations), one event encoded and decoded, one check decoded (what
// every poll reads), one job record decoded (what a poll that learns
// something reads), the app check every answer about a job makes, and a
// poll's span with tracing off and on.
func (r *runner) micro(ctx context.Context) error {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rnd := rand.New(rand.NewPCG(1, 2))
	var learned schedule.Dist
	for range 400 {
		learned.Observe(time.Duration(90 * math.Exp(0.5*rnd.NormFloat64()) * float64(time.Second)))
	}
	p := schedule.Policy{}
	cold := schedule.Job{Now: t0.Add(40 * time.Second), Submitted: t0, Polls: 3, Unchanged: 1, Expected: 90 * time.Second}
	warm := schedule.Job{Now: t0.Add(40 * time.Second), Submitted: t0, Polls: 3, Learned: &learned}
	p.Next(warm, rnd) // the learned plan is built once per distribution and cached

	j := &state.Job{ID: "k-7f3a9c2e1b", Route: "replicate", Model: "acme/video-1", RemoteID: "r8x2k9q", State: state.Succeeded,
		CreatedAt: t0, SubmittedAt: t0, ChangedAt: t0.Add(90 * time.Second), Polls: 4,
		Outputs: []string{"https://cdn.example.com/out/r8x2k9q.mp4"}}
	ev := events.NewEvent(j, state.OutboxEvent{Seq: 3, Type: events.EventSucceeded, State: state.Succeeded, At: t0.Add(90 * time.Second)})
	evBytes, err := ev.Encode()
	if err != nil {
		return err
	}
	rec, err := json.Marshal(j)
	if err != nil {
		return err
	}
	running := *j
	running.State, running.Outputs = state.Running, nil
	chk, err := jobs.EncodeCheck(&running, t0.Add(time.Minute))
	if err != nil {
		return err
	}
	tracer, _, stopTracing := benchTracer()
	defer func() { _ = stopTracing(ctx) }()
	for _, m := range []struct {
		name string
		fn   func(b *testing.B)
	}{
		{"schedule decision, cold start", func(b *testing.B) {
			for b.Loop() {
				p.Next(cold, rnd)
			}
		}},
		{"schedule decision, learned durations", func(b *testing.B) {
			for b.Loop() {
				p.Next(warm, rnd)
			}
		}},
		{"event encode", func(b *testing.B) {
			for b.Loop() {
				if _, err := ev.Encode(); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"event decode", func(b *testing.B) {
			for b.Loop() {
				if _, err := events.DecodeEvent(evBytes); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"check decode (with poll state)", func(b *testing.B) {
			for b.Loop() {
				if _, err := events.DecodeCheck(chk); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"job record decode", func(b *testing.B) {
			for b.Loop() {
				if _, err := state.Decode(rec); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"app check of a face's answer (the viewer from the request's context, then Sees)", func(b *testing.B) {
			vctx := tenant.With(ctx, tenant.Of("studio"))
			mine := &state.Job{App: "studio"}
			for b.Loop() {
				if !tenant.From(vctx).Sees(mine) {
					b.Fatal("an app's own job unseen")
				}
			}
		}},
		{"span of a poll, tracing off", func(b *testing.B) {
			job := benchTrace(0)
			for b.Loop() {
				pollSpan(ctx, nil, job)
			}
		}},
		{"span of a poll, tracing on (batched, discarded)", func(b *testing.B) {
			job := benchTrace(0)
			for b.Loop() {
				pollSpan(ctx, tracer, job)
			}
		}},
	} {
		res := testing.Benchmark(func(b *testing.B) { b.ReportAllocs(); m.fn(b) })
		r.progress("%s: %s", m.name, res.String()+" "+res.MemString())
		r.report.add(Row{Group: "micro", Name: m.name, Value: float64(res.NsPerOp()), Unit: "ns",
			Note: formatAllocs(res.AllocsPerOp(), res.AllocedBytesPerOp())})
	}
	return nil
}

func formatAllocs(allocs, bytes int64) string {
	return strconv.FormatInt(allocs, 10) + " allocs, " + strconv.FormatInt(bytes, 10) + " B"
}
