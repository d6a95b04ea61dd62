package dev

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/internal/edge/report"
	"github.com/pollux-dev/pollux/internal/wiring/app"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Summary is the outcome of a dev run.
type Summary struct {
	// JobsSubmitted counts distinct jobs submitted.
	JobsSubmitted int `json:"jobs_submitted"`
	// SubmissionsPublished counts submissions published, duplicates
	// included; DuplicatesPublished those that repeated an earlier one.
	SubmissionsPublished int `json:"submissions_published"`
	DuplicatesPublished  int `json:"duplicates_published"`
	// JobsByState counts the jobs by final state.
	JobsByState map[string]int `json:"jobs_by_state"`
	// Unfinished counts jobs not terminal at the end.
	Unfinished int `json:"unfinished"`
	// PollsPerCompletion is the finished jobs' status calls over the
	// completions (state.Tally, as `pollux stats` and the console count
	// it).
	PollsPerCompletion float64 `json:"polls_per_completion"`
	// DetectionDelayP50S, P95S and MeanS are the delays, in real seconds,
	// from the provider's completion time to Pollux knowing it.
	DetectionDelayP50S  float64 `json:"detection_delay_p50_s"`
	DetectionDelayP95S  float64 `json:"detection_delay_p95_s"`
	DetectionDelayMeanS float64 `json:"detection_delay_mean_s"`
	// Fixed compares Pollux with fixed-interval pollers on the same jobs.
	Fixed *FixedComparison `json:"fixed_interval,omitempty"`
	// WebhookCoverage is the share of the completions expecting a webhook
	// that Pollux first learned of by webhook (state.Tally, as `pollux
	// stats` and the console count it).
	WebhookCoverage float64 `json:"webhook_coverage"`
	// TimeScale is the demo's time compression; DurationS its real length.
	TimeScale float64 `json:"time_scale"`
	DurationS float64 `json:"duration_s"`
	// Sim is the simulated provider's ground truth.
	Sim sim.Stats `json:"sim"`
}

// FixedComparison is what fixed-interval pollers would have cost on the
// demo's jobs, computed from the simulator's true completion times.
type FixedComparison struct {
	// IntervalS is the interval (real seconds) at which a fixed poller has
	// Pollux's mean detection delay, and PollsPerJob its polls per job.
	IntervalS   float64 `json:"interval_s"`
	PollsPerJob float64 `json:"polls_per_job"`
	// Gain is PollsPerJob over Pollux's polls per completion.
	Gain float64 `json:"gain"`
	// SDKPollsPerJob is what the Replicate SDK's fixed 0.5 s poll (in model
	// time) would have made.
	SDKPollsPerJob float64 `json:"sdk_polls_per_job"`
	// Webhooks is true when webhooks detected completions, so the gain is
	// not the schedule's alone.
	Webhooks bool `json:"webhooks"`
}

func summarize(ctx context.Context, env *app.Env, w *workload, srv *sim.Server, cfg Config, elapsed time.Duration) (*Summary, error) {
	st := srv.Stats()
	s := &Summary{
		JobsSubmitted: int(w.accepted.Load()), SubmissionsPublished: int(w.published.Load()),
		DuplicatesPublished: int(w.duplicates.Load()), JobsByState: map[string]int{},
		TimeScale: cfg.TimeScale, DurationS: report.Round(elapsed.Seconds(), 1), Sim: st,
	}
	var delays []float64
	var tally state.Tally
	err := env.Jobs.Each(ctx, func(j *state.Job, err error) error {
		if err != nil || j.Metadata["run"] != w.run {
			return nil
		}
		s.JobsByState[string(j.State)]++
		if !j.State.Terminal() {
			s.Unfinished++
			return nil
		}
		tally.Add(j.State, j.Polls, j.WebhookExpected, j.DetectedBy)
		if j.State.Completed() {
			delays = append(delays, max(j.DetectedAt.Sub(j.CompletedAt).Seconds(), 0))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("summarize: %w", err)
	}
	s.PollsPerCompletion = report.Round(tally.PollsPerCompletion(), 2)
	s.WebhookCoverage = report.Round(tally.WebhookCoverage(), 3)
	s.DetectionDelayP50S = report.Round(report.Percentile(delays, 0.50), 3)
	s.DetectionDelayP95S = report.Round(report.Percentile(delays, 0.95), 3)
	s.DetectionDelayMeanS = report.Round(mean(delays), 3)
	s.Fixed = compareFixed(srv.Predictions(), w.run, s, cfg)
	return s, nil
}

// compareFixed computes what fixed-interval pollers would have cost on the
// jobs that completed, from their true durations.
func compareFixed(preds []sim.Prediction, run string, s *Summary, cfg Config) *FixedComparison {
	var durations []float64
	for _, p := range preds {
		if !strings.HasPrefix(p.IdempotencyKey, run) || p.Lost || p.CompletedAt == nil {
			continue
		}
		durations = append(durations, p.CompletedAt.Sub(p.CreatedAt).Seconds())
	}
	if len(durations) == 0 || s.PollsPerCompletion == 0 || s.DetectionDelayMeanS <= 0 {
		return nil
	}
	interval, polls := report.MatchFixed(durations, s.DetectionDelayMeanS)
	sdk, _ := report.FixedPolls(durations, report.SDKInterval.Seconds()/cfg.TimeScale)
	return &FixedComparison{
		IntervalS: report.Round(interval, 3), PollsPerJob: report.Round(polls, 2), Gain: report.Round(polls/s.PollsPerCompletion, 2),
		SDKPollsPerJob: report.Round(sdk, 1), Webhooks: s.WebhookCoverage > 0,
	}
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// Print writes the summary as a table.
func (s *Summary) Print(w io.Writer) {
	var states []string
	for _, st := range state.States {
		if n := s.JobsByState[string(st)]; n > 0 {
			states = append(states, fmt.Sprintf("%s %d", st, n))
		}
	}
	ms := func(sec float64) string { return fmt.Sprintf("%.2f s", sec) }
	model := func(sec float64) string { return fmt.Sprintf("%.1f s", sec*s.TimeScale) }
	fmt.Fprintf(w, "\nPollux dev: %d jobs on the simulated provider, time compressed %g×, %.1f s\n\n", s.JobsSubmitted, s.TimeScale, s.DurationS)
	rows := [][2]string{
		{"jobs by final state", strings.Join(states, " · ")},
		{"polls per completion", fmt.Sprintf("%.2f", s.PollsPerCompletion)},
		{"detection delay", fmt.Sprintf("p50 %s · p95 %s   (model time: p50 %s · p95 %s)",
			ms(s.DetectionDelayP50S), ms(s.DetectionDelayP95S), model(s.DetectionDelayP50S), model(s.DetectionDelayP95S))},
		{"webhook coverage", fmt.Sprintf("%.1f%% of completions first seen by webhook", 100*s.WebhookCoverage)},
		{"duplicates published", fmt.Sprintf("%d of %d submissions", s.DuplicatesPublished, s.SubmissionsPublished)},
	}
	if f := s.Fixed; f != nil {
		note := ""
		if f.Webhooks {
			note = "  (webhooks did most of it: --no-webhooks compares the schedule alone)"
		}
		rows = append(rows,
			[2]string{"vs fixed interval", fmt.Sprintf("%.2f polls per job polling every %.2f s for the same mean delay: %.1f× more%s",
				f.PollsPerJob, f.IntervalS, f.Gain, note)},
			[2]string{"vs Replicate SDK", fmt.Sprintf("%.1f polls per job at its fixed 0.5 s", f.SDKPollsPerJob)})
	}
	if s.Unfinished > 0 {
		rows = append(rows, [2]string{"unfinished", fmt.Sprintf("%d", s.Unfinished)})
	}
	for _, r := range rows {
		fmt.Fprintf(w, "  %-22s %s\n", r[0], r[1])
	}
	st := s.Sim
	fmt.Fprintf(w, "\n  simulated provider (ground truth)\n")
	fmt.Fprintf(w, "    creates %d · duplicate creates %d · status calls %d · peak concurrent status %d\n",
		st.Creates, st.DuplicateCreates, st.StatusCalls, st.PeakConcurrentStatus)
	fmt.Fprintf(w, "    429s %d · calls before Retry-After %d · 5xx %d · 404s %d · webhooks sent %d (missing %d, duplicated %d)\n\n",
		st.RateLimited, st.CallsBeforeRetryAfter, st.ServerErrors, st.NotFound, st.WebhooksSent, st.WebhooksMissing, st.WebhooksDuplicated)
}
