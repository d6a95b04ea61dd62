// Package report computes the fleet's figures from JetStream and KV alone —
// no Prometheus needed: per route, jobs by state, polls per completion,
// detection delay, webhook coverage and reconciliation catches (from the job
// records), tracking, backlog, leases and pauses (from the census), and
// what has been learned of each model (from the stats bucket). It is what
// `pollux stats` prints and `pollux watch` refreshes.
package report

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/learn"
	"github.com/pollux-dev/pollux/internal/edge/census"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Report is the fleet at one moment.
type Report struct {
	At     time.Time `json:"at"`
	Routes []*Route  `json:"routes"`
	// WebhooksBacklog counts stored deliveries not yet applied.
	WebhooksBacklog uint64 `json:"webhooks_backlog"`
	// EventsStored counts the events held for replay.
	EventsStored uint64 `json:"events_stored"`
	// Unreadable counts job records that did not decode.
	Unreadable int `json:"unreadable_records,omitempty"`
	// Levels are the budget levels with shared leases or running slots.
	Levels []census.Level `json:"levels,omitempty"`
	// Rates are the learned call rates in force.
	Rates []census.Rate `json:"learned_rates,omitempty"`
	// Waiting counts the pending jobs waiting to start, by what they wait
	// for (state.Job.WaitingFor): a level whose running slots they last
	// found full, a queue, their route's pause.
	Waiting map[string]int `json:"waiting,omitempty"`
}

// Route is one route's figures.
type Route struct {
	Route       string         `json:"route"`
	JobsByState map[string]int `json:"jobs_by_state"`
	// Ended counts the jobs ended (any terminal state); Completions those
	// their provider finished, succeeded or failed (state.Completed: a
	// canceled, expired or lost job is not one).
	Ended       int `json:"ended"`
	Completions int `json:"completions"`
	// PollsPerCompletion is the status calls of the jobs ended over the
	// completions (state.Tally: a canceled, expired or lost job's polls
	// count, the job does not).
	PollsPerCompletion float64 `json:"polls_per_completion"`
	// DetectionDelayP50S and P95S are seconds from the provider's
	// completion to Pollux knowing it, over the completions.
	DetectionDelayP50S float64 `json:"detection_delay_p50_s"`
	DetectionDelayP95S float64 `json:"detection_delay_p95_s"`
	// WebhookCoverage is the share of the completions expecting a webhook
	// that a webhook told first; WebhookExpected counts those completions
	// (0: the route's jobs asked for none, it is poll-only).
	WebhookCoverage float64 `json:"webhook_coverage"`
	WebhookExpected int     `json:"webhook_expected"`
	// ReconciliationCatches counts completions of jobs that expected a
	// webhook but were found by a poll: the missing webhooks.
	ReconciliationCatches int `json:"reconciliation_catches"`
	// Census is the route's tracking, backlog, leases and pause.
	Census census.Route `json:"census"`
	// Learned is what the fleet learned of each model on the route.
	Learned []Model `json:"learned,omitempty"`
	// QueueRate is how many places a second the provider's queue moves,
	// as the fleet learned it from queued jobs' places (0: unknown).
	QueueRate float64 `json:"queue_rate,omitempty"`

	delays []float64
	tally  state.Tally
}

// Model is what was learned of one model's durations.
type Model struct {
	Model     string  `json:"model"`
	ConfigKey string  `json:"config_key,omitempty"`
	Samples   float64 `json:"samples"`
	MedianS   float64 `json:"median_s"`
	P90S      float64 `json:"p90_s"`
}

// Build reads the fleet: the census, and every job through its owner.
func Build(ctx context.Context, owner *jobs.Owner, res *events.Resources) (*Report, error) {
	ns := owner.Namespace()
	snap, err := census.Take(ctx, ns, res, nil)
	if err != nil {
		return nil, err
	}
	r := &Report{At: snap.At, WebhooksBacklog: snap.Webhooks, EventsStored: snap.Events, Levels: snap.Levels, Rates: snap.Rates}
	routes := map[string]*Route{}
	get := func(name string) *Route {
		if rt := routes[name]; rt != nil {
			return rt
		}
		rt := &Route{Route: name, JobsByState: map[string]int{}}
		routes[name] = rt
		return rt
	}
	for _, c := range snap.Routes {
		get(c.Route).Census = c
	}
	err = owner.Each(ctx, func(j *state.Job, err error) error {
		if err != nil {
			r.Unreadable++
			return nil
		}
		get(j.Route).Add(j)
		if j.WaitingFor != "" && j.State == state.Pending && !j.SubmitInDoubt {
			if r.Waiting == nil {
				r.Waiting = map[string]int{}
			}
			r.Waiting[j.WaitingFor]++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := addLearned(ctx, res, get); err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(routes)) {
		rt := routes[name]
		rt.finish()
		r.Routes = append(r.Routes, rt)
	}
	return r, nil
}

// Add counts a job in the route's figures.
func (rt *Route) Add(j *state.Job) {
	rt.JobsByState[string(j.State)]++
	if j.State.Terminal() {
		rt.addFinished(j)
	}
}

// addFinished counts a finished job's polls, delay and detection.
func (rt *Route) addFinished(j *state.Job) {
	rt.tally.Add(j.State, j.Polls, j.WebhookExpected, j.DetectedBy)
	if j.State.Completed() && !j.CompletedAt.IsZero() && !j.DetectedAt.IsZero() {
		rt.delays = append(rt.delays, max(j.DetectedAt.Sub(j.CompletedAt).Seconds(), 0))
	}
}

func (rt *Route) finish() {
	t := rt.tally
	rt.Ended, rt.Completions, rt.WebhookExpected, rt.ReconciliationCatches = t.Ended, t.Completions, t.Expecting, t.ByPoll
	rt.PollsPerCompletion = Round(t.PollsPerCompletion(), 2)
	rt.WebhookCoverage = Round(t.WebhookCoverage(), 3)
	rt.DetectionDelayP50S = Round(Percentile(rt.delays, 0.5), 3)
	rt.DetectionDelayP95S = Round(Percentile(rt.delays, 0.95), 3)
}

func addLearned(ctx context.Context, res *events.Resources, get func(string) *Route) error {
	keys, err := res.Stats.ListKeys(ctx)
	if err != nil {
		return err
	}
	for k := range keys.Keys() {
		e, err := res.Stats.Get(ctx, k)
		if err != nil {
			continue
		}
		if strings.HasSuffix(k, "."+learn.ScopeQueue) {
			var q learn.QueueRecord
			if json.Unmarshal(e.Value(), &q) == nil {
				get(q.Route).QueueRate = Round(q.Rate(), 3)
			}
			continue
		}
		if strings.HasSuffix(k, "."+learn.ScopeWebhook) {
			continue // the route's webhook reliability: no model's
		}
		var rec learn.Record
		if json.Unmarshal(e.Value(), &rec) != nil || rec.Model == "" {
			continue
		}
		rt := get(rec.Route)
		rt.Learned = append(rt.Learned, Model{
			Model: rec.Model, ConfigKey: rec.ConfigKey, Samples: Round(rec.Total.Weight(), 1),
			MedianS: Round(rec.Total.Quantile(0.5).Seconds(), 1), P90S: Round(rec.Total.Quantile(0.9).Seconds(), 1),
		})
	}
	_ = keys.Stop() // the lister ends itself once every key is listed
	return nil
}

// Percentile is the q-quantile (nearest rank) of xs.
func Percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Round rounds x to digits decimals, as the figures are printed.
func Round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// Print writes the report as tables.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "Pollux fleet at %s\n\n", r.At.Local().Format(time.DateTime))
	fmt.Fprintf(w, "%-16s %8s %8s %7s %7s  %-40s %7s %8s %8s %7s\n",
		"route", "tracked", "backlog", "oldest", "intake", "jobs by state", "polls/c", "delay50", "delay95", "webhk%")
	for _, rt := range r.Routes {
		c := rt.Census
		coverage := "-" // no completion expected a webhook
		if rt.WebhookExpected > 0 {
			coverage = fmt.Sprintf("%.1f%%", 100*rt.WebhookCoverage)
		}
		fmt.Fprintf(w, "%-16s %8d %8d %7s %7d  %-40s %7.2f %7.2fs %7.2fs %7s\n",
			rt.Route, c.Tracked, c.Backlog, short(time.Duration(c.Oldest)), c.Intake, states(rt.JobsByState),
			rt.PollsPerCompletion, rt.DetectionDelayP50S, rt.DetectionDelayP95S, coverage)
	}
	fmt.Fprintln(w)
	for _, rt := range r.Routes {
		var notes []string
		for _, kind := range []string{events.SlotSubmit, events.SlotStatus} {
			if l, ok := rt.Census.Leases[kind]; ok {
				notes = append(notes, fmt.Sprintf("%s leases %d/%d", kind, l.Out, l.Cap))
			}
		}
		if p := rt.Census.Pause; p != nil {
			notes = append(notes, fmt.Sprintf("PAUSED (%s) for %s: %s", p.Kind, short(time.Until(p.Until)), p.Reason))
		}
		if rt.ReconciliationCatches > 0 {
			notes = append(notes, fmt.Sprintf("%d missing webhooks caught by polls", rt.ReconciliationCatches))
		}
		if len(notes) > 0 {
			fmt.Fprintf(w, "%-16s %s\n", rt.Route, strings.Join(notes, " · "))
		}
		if rt.QueueRate > 0 {
			fmt.Fprintf(w, "%-16s learned queue: %.3g places/s\n", "", rt.QueueRate)
		}
		for _, m := range rt.Learned {
			name := m.Model
			if m.ConfigKey != "" {
				name += " [" + m.ConfigKey + "]"
			}
			fmt.Fprintf(w, "%-16s learned %s: median %.1fs, p90 %.1fs (%.0f recent jobs)\n", "", name, m.MedianS, m.P90S, m.Samples)
		}
	}
	if len(r.Levels) > 0 || len(r.Rates) > 0 {
		fmt.Fprintln(w)
	}
	for _, l := range r.Levels {
		var notes []string
		for _, kind := range []string{events.SlotSubmit, events.SlotStatus} {
			if ls, ok := l.Leases[kind]; ok {
				notes = append(notes, fmt.Sprintf("%s leases %d/%d", kind, ls.Out, ls.Cap))
			}
		}
		if l.Running != nil {
			notes = append(notes, fmt.Sprintf("running %d/%d", l.Running.Out, l.Running.Cap))
		}
		fmt.Fprintf(w, "%-24s %s\n", l.Level, strings.Join(notes, " · "))
	}
	for _, lr := range r.Rates {
		configured := "none configured"
		if lr.Configured > 0 {
			configured = fmt.Sprintf("configured %.3g/s", lr.Configured)
		}
		fmt.Fprintf(w, "%-24s %s rate learned %.3g/s (%s; lowered %d times)\n", lr.Level, lr.Kind, lr.Rate, configured, lr.Lowered)
	}
	for _, level := range slices.Sorted(maps.Keys(r.Waiting)) {
		fmt.Fprintf(w, "%-24s %d jobs waiting to start\n", level, r.Waiting[level])
	}
	fmt.Fprintf(w, "\nwebhook deliveries waiting %d · events stored %d\n", r.WebhooksBacklog, r.EventsStored)
	if r.Unreadable > 0 {
		fmt.Fprintf(w, "%d job records could not be read\n", r.Unreadable)
	}
}

func states(m map[string]int) string {
	var parts []string
	for _, s := range state.States {
		if n := m[string(s)]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, n))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func short(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Minute:
		return fmt.Sprintf("%.0fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%.0fm", d.Minutes())
	}
	return fmt.Sprintf("%.1fh", d.Hours())
}

// Live keeps a report current from the events stream, after one scan of
// the job records: what `pollux watch` shows. Its polls per completion
// counts each job's polls as its terminal event has them: a status call
// counted into a job after its end (one under way when a webhook ended
// it) is in the record, `pollux stats` and the metrics, not here.
type Live struct {
	routes map[string]*Route
	jobs   map[string]state.State
}

// NewLive returns an empty live report.
func NewLive() *Live {
	return &Live{routes: map[string]*Route{}, jobs: map[string]state.State{}}
}

func (l *Live) route(name string) *Route {
	rt := l.routes[name]
	if rt == nil {
		rt = &Route{Route: name, JobsByState: map[string]int{}}
		l.routes[name] = rt
	}
	return rt
}

// Seed counts a job from the initial scan.
func (l *Live) Seed(j *state.Job) {
	l.jobs[j.ID] = j.State
	l.route(j.Route).Add(j)
}

// Apply moves a job to the state of one of its events.
func (l *Live) Apply(ev *events.Event) {
	if ev.Job == nil || !ev.State.Valid() {
		return
	}
	prev, seen := l.jobs[ev.JobID]
	if seen && (prev == ev.State || prev.Terminal()) {
		return
	}
	rt := l.route(ev.Route)
	if seen {
		if rt.JobsByState[string(prev)]--; rt.JobsByState[string(prev)] <= 0 {
			delete(rt.JobsByState, string(prev))
		}
	}
	l.jobs[ev.JobID] = ev.State
	rt.JobsByState[string(ev.State)]++
	if ev.State.Terminal() {
		rt.addFinished(ev.Job)
	}
}

// Report returns the figures with the given census.
func (l *Live) Report(snap *census.Snapshot) *Report {
	r := &Report{At: time.Now().UTC()}
	if snap != nil {
		r.At, r.WebhooksBacklog, r.EventsStored = snap.At, snap.Webhooks, snap.Events
		for _, c := range snap.Routes {
			l.route(c.Route).Census = c
		}
	}
	for _, name := range slices.Sorted(maps.Keys(l.routes)) {
		rt := *l.routes[name]
		rt.JobsByState = maps.Clone(rt.JobsByState)
		rt.finish()
		r.Routes = append(r.Routes, &rt)
	}
	return r
}
