package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// The limits section: an account whose limits are hidden (the simulated
// provider runs at most hiddenRunning predictions and takes hiddenRate
// calls a second, answering 429 without Retry-After past either), a route
// that configures nothing but learn_running and learn_rate and polls
// eagerly (its jobs ask for more calls than the rate allows), and a
// backlog it cannot finish. After limitsLearn, the figures are how close to the
// hidden limits the fleet runs and how many of its calls are refused, over
// limitsMeasure.
const (
	hiddenRunning = 4
	hiddenRate    = 5.0
	limitsLearn   = 2 * time.Minute
	limitsMeasure = 2 * time.Minute
	limitsJobs    = 1000
)

func (r *runner) limits(ctx context.Context) error {
	return r.withStack(ctx, dev.StackConfig{
		Sim: sim.Config{Seed: 3, Limits: sim.Limits{Running: hiddenRunning, Rate: hiddenRate},
			Default: sim.Model{QueueMedian: sim.Duration(500 * time.Millisecond), RunMedian: sim.Duration(4 * time.Second), RunSigma: 0.3}},
		// Polls priced low, so that the jobs ask for more calls than
		// the hidden rate takes: both limits bind.
		Route: config.Route{Budgets: config.Budgets{LearnRunning: true, LearnRate: true}, Workers: config.Workers{Submit: 8},
			Poll: config.Poll{PollCost: 100 * time.Millisecond, MaxDelay: 2 * time.Second}},
		NoWebhooks: true,
	}, func(st *dev.Stack, js jetstream.JetStream) error {
		for i := range limitsJobs {
			msg, err := json.Marshal(events.Submit{V: events.Version, IdempotencyKey: fmt.Sprintf("limits-%04d", i), Model: "m/model", Input: json.RawMessage(`{}`)})
			if err != nil {
				return err
			}
			if _, err := js.Publish(ctx, st.Env.NS.Submit(dev.RouteName), msg); err != nil {
				return err
			}
		}
		r.progress("hidden limits %d running, %.0f calls/s; nothing configured: learning for %s", hiddenRunning, hiddenRate, limitsLearn)
		start := time.Now()
		var at0 sim.Stats
		var running, samples int
		for tick := time.NewTicker(time.Second); ; {
			select {
			case <-ctx.Done():
				tick.Stop()
				return ctx.Err()
			case <-tick.C:
			}
			s := st.Sim.Stats()
			el := time.Since(start)
			if el < limitsLearn {
				if int(el.Seconds())%20 == 0 {
					r.progress("  %3.0fs: %d running, %d calls, %d refused; %s", el.Seconds(), s.Running, s.Calls, s.RateLimited, learnedLimits(ctx, js, st))
				}
				at0 = s
				continue
			}
			running += s.Running
			samples++
			if el < limitsLearn+limitsMeasure {
				continue
			}
			tick.Stop()
			calls, refused := s.Calls-at0.Calls, s.RateLimited-at0.RateLimited
			window := limitsMeasure.Seconds()
			meanRunning := float64(running) / float64(samples)
			callRate := float64(calls) / window
			share := 0.0
			if calls > 0 {
				share = float64(refused) / float64(calls) * 100
			}
			r.progress("  %s", learnedLimits(ctx, js, st))
			r.progress("  after %s: %.2f running on average, %.2f calls/s, %.1f%% refused; %d jobs created, most creates per key %d",
				limitsLearn, meanRunning, callRate, share, s.Creates, s.MaxCreatesPerKey)
			note := fmt.Sprintf("hidden limits %d running, %.0f calls/s, nothing configured (learn_running, learn_rate); over the %s after %s of learning, sampled each second by the simulated provider",
				hiddenRunning, hiddenRate, limitsMeasure, limitsLearn)
			r.report.add(Row{Group: "limits", Name: "jobs running at the provider, share of the hidden cap", Value: meanRunning / hiddenRunning * 100, Unit: "%", Note: note}).
				atLeast(80, false, "≥ 80%")
			r.report.add(Row{Group: "limits", Name: "calls a second, share of the hidden rate", Value: callRate / hiddenRate * 100, Unit: "%",
				Note: "status polls and creates; the rate binds only while the jobs need that many calls"})
			r.report.add(Row{Group: "limits", Name: "calls answered 429 once learned", Value: share, Unit: "%",
				Note: fmt.Sprintf("%d of %d calls; %d jobs created, never one twice (most creates per key: %d)", refused, calls, s.Creates, s.MaxCreatesPerKey)}).
				atMost(2, "< 2%")
			return nil
		}
	})
}

// learnedLimits says what the route learned so far: its running cap and
// its call rates.
func learnedLimits(ctx context.Context, js jetstream.JetStream, st *dev.Stack) string {
	out := "running cap ?"
	if s, err := js.Stream(ctx, st.Env.NS.RunningStream(events.LevelRoute, dev.RouteName)); err == nil {
		out = fmt.Sprintf("running cap %d", s.CachedInfo().Config.MaxMsgs)
	}
	for _, kind := range []string{events.SlotSubmit, events.SlotStatus} {
		lr := "none"
		if e, err := st.Env.Res.Limits.Get(ctx, events.LimitsKey(dev.RouteName, kind)); err == nil {
			var v budget.LearnedRate
			if json.Unmarshal(e.Value(), &v) == nil {
				lr = fmt.Sprintf("%.2f/s", v.Rate)
			}
		}
		out += fmt.Sprintf(", %s rate %s", kind, lr)
	}
	return out
}
