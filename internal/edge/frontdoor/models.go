package frontdoor

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/pollux-dev/pollux/internal/edge/report"
	"github.com/pollux-dev/pollux/internal/edge/tenant"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/schedule"
)

// Models is what GET /v1/models answers: the models the index has seen, with
// what is learned of each.
type Models struct {
	Models []ModelSummary `json:"models"`
}

// ModelSummary is one model of a route in GET /v1/models.
type ModelSummary struct {
	Route string `json:"route"`
	Model string `json:"model"`
	// Samples is the learned distribution's effective sample count (0:
	// nothing learned yet); Learned is true once it is enough for the
	// schedule to follow the learned plan (schedule.Policy.MinSamples).
	Samples float64 `json:"samples"`
	Learned bool    `json:"learned"`
	// P50S and P90S are the learned median and 90th percentile duration
	// (absent when nothing is learned).
	P50S float64 `json:"p50_s,omitempty"`
	P90S float64 `json:"p90_s,omitempty"`
	// Href is the model's details (GET /v1/routes/{route}/models/{model}).
	Href string `json:"href"`
}

// Model is what GET /v1/routes/{name}/models/{model} answers: the learned
// distribution of the model's durations (acceptance to end, real time),
// the poll plan the schedule follows for it, and what that plan costs
// against a fixed interval and a provider SDK's default.
type Model struct {
	Route string `json:"route"`
	Model string `json:"model"`
	// Samples is the effective sample count (recent jobs weigh most),
	// Observed the jobs ever observed; Learned is true once Samples
	// reaches MinSamples and the schedule follows the learned plan
	// (schedule.Policy.UsesLearned); before, it follows the cold-start
	// table.
	Samples    float64 `json:"samples"`
	Observed   uint64  `json:"observed"`
	MinSamples float64 `json:"min_samples"`
	Learned    bool    `json:"learned"`
	// Quantiles are the durations below which the share Q of jobs end.
	Quantiles []Quantile `json:"quantiles"`
	// Histogram is the distribution in log-spaced bins from its 0.5th to
	// its 99.5th percentile; the shares add up to about 0.99.
	Histogram []Bin `json:"histogram"`
	// Plan is the plan the schedule follows for a job of this model now:
	// the learned plan once Learned, else the cold-start table's (Source
	// says which).
	Plan PlanView `json:"plan"`
	// LearnedPlan is, while not Learned, the plan learned so far: what
	// the schedule follows once Samples reaches MinSamples (absent once
	// Learned: it is Plan).
	LearnedPlan *PlanView `json:"learned_plan,omitempty"`
	// Comparison is what polling this model's jobs costs Pollux (with the
	// plan in force), a fixed interval with the same mean detection delay
	// and the SDK default, on the durations learned so far.
	Comparison Comparison `json:"comparison"`
}

// Quantile is a duration quantile.
type Quantile struct {
	Q float64 `json:"q"`
	S float64 `json:"s"`
}

// Bin is a histogram bin: the share of jobs ending in [LoS, HiS).
type Bin struct {
	LoS   float64 `json:"lo_s"`
	HiS   float64 `json:"hi_s"`
	Share float64 `json:"share"`
}

// PlanView is a poll plan: its first poll times from submission, and its
// expected polls per job and mean detection delay on the learned
// durations.
type PlanView struct {
	// Source is learned (the cost-optimal plan of the learned durations)
	// or cold_start (the cold-start table's polls for a job submitted
	// without an expected duration, each at the middle of its jitter; a
	// submission's hint picks another row).
	Source        string    `json:"source"`
	PollsS        []float64 `json:"polls_s"`
	ExpectedPolls float64   `json:"expected_polls"`
	MeanDelayS    float64   `json:"mean_delay_s"`
}

// Comparison compares polling strategies on the model's learned durations.
type Comparison struct {
	Pollux Strategy `json:"pollux"`
	// Fixed polls at the fixed interval that has Pollux's mean detection
	// delay; SDK at a provider SDK's default (0.5 s, model time).
	Fixed Strategy `json:"fixed"`
	SDK   Strategy `json:"sdk"`
	// SavingVsFixed and SavingVsSDK are their polls per job over
	// Pollux's.
	SavingVsFixed float64 `json:"saving_vs_fixed"`
	SavingVsSDK   float64 `json:"saving_vs_sdk"`
}

// Strategy is what one polling strategy costs per job.
type Strategy struct {
	// IntervalS is a fixed strategy's interval, in real seconds.
	IntervalS   float64 `json:"interval_s,omitempty"`
	PollsPerJob float64 `json:"polls_per_job"`
	MeanDelayS  float64 `json:"mean_delay_s"`
}

// The model figures' resolution.
const (
	planPolls = 20  // poll times shown
	histBins  = 24  // histogram bins
	strata    = 500 // durations standing for the distribution
)

var quantiles = []float64{0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99}

// models handles GET /v1/models?route=: every model the index has seen (on
// the route, when given), with what is learned of it.
func (s *Server) models(w http.ResponseWriter, r *http.Request) *apiError {
	if s.cfg.Index == nil {
		return noIndex()
	}
	if s.cfg.Learned == nil {
		return noLearned()
	}
	routes := s.cfg.Routes
	if rt := r.URL.Query().Get("route"); rt != "" {
		if !s.knownRoute(rt) {
			return fail(http.StatusNotFound, CodeUnknownRoute, "route", fmt.Sprintf("no route named %q", rt))
		}
		routes = []string{rt}
	}
	out := Models{Models: []ModelSummary{}}
	for _, rt := range routes {
		policy := s.policy(rt)
		for _, m := range s.cfg.Index.Models(rt) {
			sum := ModelSummary{Route: rt, Model: m, Href: "/v1/routes/" + rt + "/models/" + url.PathEscape(m)}
			if d, _ := s.cfg.Learned(rt, m, ""); d != nil && d.Weight() > 0 {
				sum.Samples, sum.Learned = round(d.Weight()), policy.UsesLearned(d)
				if !tenant.From(r.Context()).SeesFleet() {
					sum.Samples = 0 // how many jobs every app ran: the fleet's number
				}
				sum.P50S, sum.P90S = round(d.Quantile(0.5).Seconds()), round(d.Quantile(0.9).Seconds())
			}
			out.Models = append(out.Models, sum)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func noLearned() *apiError {
	return fail(http.StatusServiceUnavailable, CodeUnavailable, "", "this front door does not read the learned durations")
}

// model handles GET /v1/routes/{name}/models/{model}: the model name
// escaped as one segment (owner%2Fname), or not.
func (s *Server) model(w http.ResponseWriter, r *http.Request) *apiError {
	if s.cfg.Learned == nil {
		return noLearned()
	}
	rt, m := r.PathValue("name"), r.PathValue("model")
	if !s.knownRoute(rt) {
		return fail(http.StatusNotFound, CodeUnknownRoute, "name", fmt.Sprintf("no route named %q", rt))
	}
	if m == "" || len(m) > events.MaxModelLen {
		return fail(http.StatusBadRequest, CodeInvalidParameter, "model", fmt.Sprintf("a model name is 1 to %d bytes", events.MaxModelLen))
	}
	d, _ := s.cfg.Learned(rt, m, "")
	if d == nil || d.Weight() <= 0 {
		return fail(http.StatusNotFound, CodeModelNotFound, "model", fmt.Sprintf("nothing is learned yet of model %q on route %s: it is learned from the jobs that end", m, rt))
	}
	out := describe(rt, m, d, s.policy(rt))
	if !tenant.From(r.Context()).SeesFleet() {
		out.Samples, out.Observed = 0, 0 // how many jobs every app ran: the fleet's number
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// policy returns the schedule of a route (the default one when not given).
func (s *Server) policy(rt string) schedule.Policy {
	return s.cfg.Policies[rt].WithDefaults()
}

// describe computes a model's figures from its learned distribution d and
// its route's policy p.
func describe(rt, m string, d *schedule.Dist, p schedule.Policy) Model {
	out := Model{
		Route: rt, Model: m, Samples: round(d.Weight()), Observed: d.Count(), MinSamples: p.MinSamples,
		Learned: p.UsesLearned(d), Quantiles: []Quantile{}, Histogram: []Bin{},
	}
	for _, q := range quantiles {
		out.Quantiles = append(out.Quantiles, Quantile{Q: q, S: round(d.Quantile(q).Seconds())})
	}
	lo, hi := max(d.Quantile(0.005).Seconds(), 1e-3), d.Quantile(0.995).Seconds()
	if hi > lo {
		ratio := math.Pow(hi/lo, 1.0/histBins)
		for i := range histBins {
			a, b := lo*math.Pow(ratio, float64(i)), lo*math.Pow(ratio, float64(i+1))
			share := d.Survival(seconds(a)) - d.Survival(seconds(b))
			out.Histogram = append(out.Histogram, Bin{LoS: round(a), HiS: round(b), Share: round(share)})
		}
	}
	// The durations standing for the distribution: its quantiles at the
	// middle of equal strata. Every strategy is scored on them.
	durations := make([]float64, strata)
	for i := range durations {
		durations[i] = d.Quantile((float64(i) + 0.5) / strata).Seconds()
	}

	plan := p.Plan(d)
	polls, delay := plan.Expected()
	learned := PlanView{Source: PlanLearned, PollsS: secondsOf(plan.Times(planPolls)), ExpectedPolls: round(polls), MeanDelayS: round(delay.Seconds())}
	ppolls, pdelay := onPlan(durations, plan)
	if out.Learned {
		out.Plan = learned
	} else {
		cold := p.ColdTimes(0, seconds(durations[len(durations)-1]), planPolls)
		ppolls, pdelay = onTimes(durations, cold)
		out.Plan = PlanView{Source: PlanColdStart, PollsS: secondsOf(cold[:min(planPolls, len(cold))]), ExpectedPolls: round(ppolls), MeanDelayS: round(pdelay)}
		out.LearnedPlan = &learned
	}
	out.Comparison.Pollux = Strategy{PollsPerJob: round(ppolls), MeanDelayS: round(pdelay)}
	if pdelay > 0 && ppolls > 0 {
		interval, fpolls := report.MatchFixed(durations, pdelay)
		out.Comparison.Fixed = Strategy{IntervalS: round(interval), PollsPerJob: round(fpolls), MeanDelayS: round(pdelay)}
		out.Comparison.SavingVsFixed = round(fpolls / ppolls)
	}
	sdkInterval := report.SDKInterval.Seconds() / p.Scale
	spolls, sdelay := report.FixedPolls(durations, sdkInterval)
	out.Comparison.SDK = Strategy{IntervalS: round(sdkInterval), PollsPerJob: round(spolls), MeanDelayS: round(sdelay)}
	if ppolls > 0 {
		out.Comparison.SavingVsSDK = round(spolls / ppolls)
	}
	return out
}

// Plan sources of PlanView.
const (
	PlanLearned   = "learned"
	PlanColdStart = "cold_start"
)

// onTimes is what polling at times (ascending, the last at or past the
// longest duration) costs on jobs of the given durations: polls per job
// and mean detection delay (seconds).
func onTimes(durations []float64, times []time.Duration) (polls, delay float64) {
	if len(durations) == 0 || len(times) == 0 {
		return 0, 0
	}
	for _, d := range durations {
		i := min(sort.Search(len(times), func(i int) bool { return times[i].Seconds() >= d }), len(times)-1)
		polls += float64(i + 1)
		delay += max(times[i].Seconds()-d, 0)
	}
	return polls / float64(len(durations)), delay / float64(len(durations))
}

// secondsOf rounds durations to seconds.
func secondsOf(ts []time.Duration) []float64 {
	out := make([]float64, 0, len(ts))
	for _, t := range ts {
		out = append(out, round(t.Seconds()))
	}
	return out
}

// onPlan is what following plan costs on jobs of the given durations:
// polls per job and mean detection delay (seconds).
func onPlan(durations []float64, plan *schedule.Plan) (polls, delay float64) {
	if len(durations) == 0 {
		return 0, 0
	}
	for _, d := range durations {
		var t time.Duration
		for n := 1; ; n++ {
			t += plan.Delay(t)
			if t.Seconds() >= d || n == 100_000 {
				polls += float64(n)
				delay += max(t.Seconds()-d, 0)
				break
			}
		}
	}
	return polls / float64(len(durations)), delay / float64(len(durations))
}

func seconds(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }

// round keeps four significant decimals: figures, not noise.
func round(x float64) float64 { return report.Round(x, 4) }
