package dev

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/internal/app"
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
	// PollsPerCompletion is status calls per finished job.
	PollsPerCompletion float64 `json:"polls_per_completion"`
	// DetectionDelayP50S and P95S are the delays, in real seconds, from
	// the provider's completion time to Pollux knowing it.
	DetectionDelayP50S float64 `json:"detection_delay_p50_s"`
	DetectionDelayP95S float64 `json:"detection_delay_p95_s"`
	// WebhookCoverage is the share of completions (succeeded, failed,
	// canceled) that Pollux first learned of by webhook.
	WebhookCoverage float64 `json:"webhook_coverage"`
	// TimeScale is the demo's time compression; DurationS its real length.
	TimeScale float64 `json:"time_scale"`
	DurationS float64 `json:"duration_s"`
	// Sim is the simulated provider's ground truth.
	Sim sim.Stats `json:"sim"`
}

func summarize(ctx context.Context, env *app.Env, w *workload, st sim.Stats, cfg Config, elapsed time.Duration) (*Summary, error) {
	s := &Summary{
		JobsSubmitted: int(w.accepted.Load()), SubmissionsPublished: int(w.published.Load()),
		DuplicatesPublished: int(w.duplicates.Load()), JobsByState: map[string]int{},
		TimeScale: cfg.TimeScale, DurationS: round(elapsed.Seconds(), 1), Sim: st,
	}
	var delays []float64
	polls, finished, completions, byWebhook := 0, 0, 0, 0
	err := env.Life.Store().Each(ctx, func(j *state.Job, err error) error {
		if err != nil || j.Metadata["run"] != w.run {
			return nil
		}
		s.JobsByState[string(j.State)]++
		if !j.State.Terminal() {
			s.Unfinished++
			return nil
		}
		finished++
		polls += j.Polls
		switch j.State {
		case state.Succeeded, state.Failed, state.Canceled:
			completions++
			if j.DetectedBy == state.FromWebhook {
				byWebhook++
			}
			delays = append(delays, max(j.DetectedAt.Sub(j.CompletedAt).Seconds(), 0))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("summarize: %w", err)
	}
	if finished > 0 {
		s.PollsPerCompletion = round(float64(polls)/float64(finished), 2)
	}
	if completions > 0 {
		s.WebhookCoverage = round(float64(byWebhook)/float64(completions), 3)
	}
	s.DetectionDelayP50S = round(percentile(delays, 0.50), 3)
	s.DetectionDelayP95S = round(percentile(delays, 0.95), 3)
	return s, nil
}

// percentile returns the q-quantile (nearest rank) of xs.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
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
