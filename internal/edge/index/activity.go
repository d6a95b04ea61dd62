package index

import (
	"slices"
	"time"

	"github.com/pollux-dev/pollux/pkg/state"
)

// Minute is one minute of a route's activity.
type Minute struct {
	// Start is the minute's start.
	Start time.Time `json:"start"`
	// Ended counts the jobs that ended (any terminal state) in the
	// minute, Failures those of them that failed, expired or were lost;
	// Completions those their provider finished, succeeded or failed
	// (state.Completed).
	Ended       int `json:"ended"`
	Failures    int `json:"failures"`
	Completions int `json:"completions"`
	// Polls is the status calls the jobs that ended made in all their
	// life; WebhookExpected counts the completions of jobs that expected
	// a webhook, ByWebhook those of them a webhook told first.
	Polls           int `json:"polls"`
	WebhookExpected int `json:"webhook_expected"`
	ByWebhook       int `json:"by_webhook"`
	// DetectP50 and DetectP95 are quantiles of the detection delay
	// (DetectedAt - CompletedAt) of the completions, in seconds.
	DetectP50 float64 `json:"detect_p50"`
	DetectP95 float64 `json:"detect_p95"`
}

// Activity is a route's (or the fleet's) last hour, from the terminal
// events in the stream.
type Activity struct {
	// Route is the route, "" for every route.
	Route string `json:"route"`
	// Minutes are the hour's 60 minutes, oldest first; the last is the
	// current minute.
	Minutes []Minute `json:"minutes"`
	// Ended and Completions are the hour's totals; PollsPerCompletion
	// its ended jobs' polls over its completions (state.Tally, as `pollux
	// stats` counts).
	Ended              int     `json:"ended"`
	Completions        int     `json:"completions"`
	PollsPerCompletion float64 `json:"polls_per_completion"`
	// DetectP50 and DetectP95 are the hour's detection delay quantiles,
	// in seconds.
	DetectP50 float64 `json:"detect_p50"`
	DetectP95 float64 `json:"detect_p95"`
	// WebhookCoverage is the share of the hour's completions expecting a
	// webhook that a webhook told first (0 to 1); WebhookExpected counts
	// those completions (0: no coverage to speak of).
	WebhookCoverage float64 `json:"webhook_coverage"`
	WebhookExpected int     `json:"webhook_expected"`
}

// maxSamples bounds the detection delays a minute keeps for quantiles
// (the first of the minute's ends), so that Activity sorts at most 60
// times as many.
const maxSamples = 512

// bucket is one minute's figures.
type bucket struct {
	minute   int64 // unix minutes
	tally    state.Tally
	failures int
	delays   []float64
}

// ring is the last 60 minutes of a route, by unix minute mod 60.
type ring [60]bucket

// activity holds a ring per route and one for every route ("").
type activity struct {
	rings map[string]*ring
}

func newActivity() activity { return activity{rings: map[string]*ring{}} }

// add records job's end, told by an event at t.
func (a activity) add(route string, t time.Time, j *snapshot) {
	for _, r := range []string{route, ""} {
		g := a.rings[r]
		if g == nil {
			g = &ring{}
			a.rings[r] = g
		}
		g.add(t, j)
	}
}

func (g *ring) add(t time.Time, j *snapshot) {
	m := minuteOf(t)
	b := &g[m%60]
	switch {
	case b.minute > m:
		return // an end older than the hour the slot holds
	case b.minute < m:
		*b = bucket{minute: m, delays: b.delays[:0]}
	}
	b.tally.Add(j.State, j.Polls, j.WebhookExpected, j.DetectedBy)
	switch j.State {
	case state.Failed, state.Expired, state.Lost:
		b.failures++
	}
	if j.State.Completed() && !j.DetectedAt.IsZero() && !j.CompletedAt.IsZero() && len(b.delays) < maxSamples {
		b.delays = append(b.delays, max(j.DetectedAt.Sub(j.CompletedAt).Seconds(), 0))
	}
}

// minuteOf returns t's unix minute.
func minuteOf(t time.Time) int64 {
	s := t.Unix()
	if s < 0 {
		return (s - 59) / 60
	}
	return s / 60
}

// Activity returns route's activity ("" = every route) over the hour
// ending with the current minute.
func (x *Index) Activity(route string) Activity {
	now := minuteOf(x.cfg.Now())
	a := Activity{Route: route, Minutes: make([]Minute, 60)}
	var all []float64
	var hour state.Tally
	x.mu.RLock()
	defer x.mu.RUnlock()
	g := x.act.rings[route]
	for i := range a.Minutes {
		m := now - 59 + int64(i)
		mi := Minute{Start: time.Unix(m*60, 0).UTC()}
		if g != nil {
			if b := &g[((m%60)+60)%60]; b.minute == m && b.tally.Ended > 0 {
				t := b.tally
				hour.Merge(t)
				mi.Ended, mi.Failures, mi.Completions, mi.Polls = t.Ended, b.failures, t.Completions, t.Polls
				mi.WebhookExpected, mi.ByWebhook = t.Expecting, t.ByWebhook
				d := slices.Clone(b.delays)
				slices.Sort(d)
				mi.DetectP50, mi.DetectP95 = quantile(d, 0.5), quantile(d, 0.95)
				all = append(all, d...)
			}
		}
		a.Minutes[i] = mi
	}
	a.Ended, a.Completions, a.WebhookExpected = hour.Ended, hour.Completions, hour.Expecting
	a.PollsPerCompletion, a.WebhookCoverage = hour.PollsPerCompletion(), hour.WebhookCoverage()
	slices.Sort(all)
	a.DetectP50, a.DetectP95 = quantile(all, 0.5), quantile(all, 0.95)
	return a
}

// quantile returns the q-quantile of sorted values (nearest rank), 0 for
// none.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
