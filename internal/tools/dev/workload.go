package dev

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/pollux-dev/pollux/internal/wiring/app"
	"github.com/pollux-dev/pollux/pkg/events"
)

// workload submits the demo jobs through NATS, as any client would.
type workload struct {
	cfg Config
	env *app.Env
	run string

	published  atomic.Int64 // submissions published, duplicates included
	duplicates atomic.Int64 // of which duplicates
	accepted   atomic.Int64 // distinct jobs published
}

func (w *workload) key(i int) string { return fmt.Sprintf("%s-%04d", w.run, i) }

// submit publishes cfg.Jobs submissions spread over cfg.Spread; a share of
// them is published again, half at once and half after all the others.
func (w *workload) submit(ctx context.Context) error {
	seed := uint64(w.cfg.Seed)
	if seed == 0 {
		seed = rand.Uint64()
	}
	rnd := rand.New(rand.NewPCG(seed, 42))
	models := make([]string, 0, len(w.cfg.Models))
	for m := range w.cfg.Models {
		models = append(models, m)
	}
	slices.Sort(models)

	var later [][]byte
	start := time.Now()
	for i := range w.cfg.Jobs {
		due := start.Add(time.Duration(float64(w.cfg.Spread) * float64(i) / float64(w.cfg.Jobs)))
		if !sleepUntil(ctx, due) {
			return nil
		}
		model := models[rnd.IntN(len(models))]
		m := w.cfg.Models[model]
		expected := (time.Duration(m.QueueMedian) + time.Duration(m.RunMedian)).Seconds() / w.cfg.TimeScale
		msg, err := json.Marshal(events.Submit{
			V: events.Version, IdempotencyKey: w.key(i), Model: model,
			Input:             json.RawMessage(fmt.Sprintf(`{"prompt":"demo clip %d"}`, i)),
			ExpectedDurationS: expected,
			Metadata:          map[string]string{"run": w.run},
		})
		if err != nil {
			return err
		}
		if err := w.publish(ctx, msg); err != nil {
			return err
		}
		w.accepted.Add(1)
		if rnd.Float64() < w.cfg.DuplicateRate {
			if rnd.IntN(2) == 0 {
				if err := w.publish(ctx, msg); err != nil {
					return err
				}
				w.duplicates.Add(1)
			} else {
				later = append(later, msg)
			}
		}
	}
	for _, msg := range later {
		if err := w.publish(ctx, msg); err != nil {
			return err
		}
		w.duplicates.Add(1)
	}
	return nil
}

func (w *workload) publish(ctx context.Context, msg []byte) error {
	if _, err := w.env.JS.Publish(ctx, w.env.NS.Submit(RouteName), msg); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("publish a demo submission: %w", err)
	}
	w.published.Add(1)
	return nil
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
