package simulate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/pollux-dev/pollux/internal/core/learn"
	"github.com/pollux-dev/pollux/pkg/schedule"
)

// kind is a family of strategies.
type kind uint8

const (
	adaptive   kind = iota // Pollux: schedule.Policy learning online
	seedTable              // schedule.Policy's cold-start table, never learning
	fixed                  // a constant interval
	google                 // 1 s ×1.5 → 20 s, full jitter
	smithy                 // Smithy/AWS waiters: 2 → 120 s
	optimal                // the plan of the true distribution
	fixedQuiet             // adaptive, but a webhook job's fixed quiet period
	population             // the plan of the model's population (Config.Population)
)

// Strategy is a polling strategy under test.
type Strategy struct {
	// Name is the strategy as --strategy names it.
	Name  string
	kind  kind
	every float64 // fixed's interval, seconds
}

// StrategyNames lists the strategies --strategy accepts.
const StrategyNames = "adaptive, adaptive-fixed-quiet, seed-table, fixed:<seconds>, google, smithy, optimal, population"

// PopulationName is the strategy that plans each model's population
// (Config.Population): the optimum for the model, not for the very jobs
// scored.
const PopulationName = "population"

// FixedQuietName is adaptive without its learned webhook reliability: a
// job expecting a webhook waits the fixed quiet period (the learned 90th
// percentile plus WebhookGrace), then polls every Reconcile. Run adds it
// after adaptive when jobs expect webhooks.
const FixedQuietName = "adaptive-fixed-quiet"

// DefaultStrategies are the strategies run when none are named: Pollux,
// its cold start, the SDKs' fixed intervals (OpenAI's 1 s, the 10 s loop of
// Google's docs), their backoffs, and the optimum.
func DefaultStrategies() []Strategy {
	return []Strategy{
		{Name: "adaptive", kind: adaptive},
		{Name: "seed-table", kind: seedTable},
		{Name: "fixed:1", kind: fixed, every: 1},
		{Name: "fixed:10", kind: fixed, every: 10},
		{Name: "google", kind: google},
		{Name: "smithy", kind: smithy},
		{Name: "optimal", kind: optimal},
	}
}

// ParseStrategy parses one of StrategyNames.
func ParseStrategy(name string) (Strategy, error) {
	switch name {
	case "adaptive":
		return Strategy{Name: name, kind: adaptive}, nil
	case FixedQuietName:
		return Strategy{Name: name, kind: fixedQuiet}, nil
	case "seed-table":
		return Strategy{Name: name, kind: seedTable}, nil
	case "google":
		return Strategy{Name: name, kind: google}, nil
	case "smithy":
		return Strategy{Name: name, kind: smithy}, nil
	case "optimal":
		return Strategy{Name: name, kind: optimal}, nil
	case PopulationName:
		return Strategy{Name: name, kind: population}, nil
	}
	if s, ok := strings.CutPrefix(name, "fixed:"); ok {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || !(x > 0) || math.IsInf(x, 0) {
			return Strategy{}, fmt.Errorf("strategy %q: the interval must be a number of seconds > 0", name)
		}
		return Strategy{Name: "fixed:" + strconv.FormatFloat(x, 'g', -1, 64), kind: fixed, every: x}, nil
	}
	return Strategy{}, fmt.Errorf("unknown strategy %q; want one of %s", name, StrategyNames)
}

// poller decides one strategy's delays during a run.
type poller interface {
	// next returns the delay before the next poll of job i, at now; st.polls
	// is 0 at submission.
	next(i int, st *jobState, now float64) float64
	// done records that job i was seen terminal at now, by its webhook or
	// by a poll.
	done(i int, now float64, byWebhook bool)
}

// jobState is what a poller knows of a job between polls.
type jobState struct {
	polls     int32
	unchanged int32
	phase     schedule.Phase
	progress  float64 // the completed share the provider last reported; 0 none
	resolved  bool    // seen terminal, by a poll or the webhook
}

// epoch anchors virtual time for schedule.Job's timestamps.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time                    { return epoch.Add(dur(s)) }
func dur(s float64) time.Duration               { return time.Duration(s * float64(time.Second)) }
func secs(d time.Duration) float64              { return d.Seconds() }
func unif(r *rand.Rand, lo, hi float64) float64 { return lo + (hi-lo)*r.Float64() }

// newPoller makes the poller of a strategy for one run; knobs[m] is model
// m's setting: the poll cost in seconds (adaptive, optimal) or a factor on
// every delay, and rnd[m] its random stream.
func (r *run) newPoller(s Strategy, knobs []float64, rnd []*rand.Rand) poller {
	switch s.kind {
	case adaptive, fixedQuiet, seedTable:
		pp := &policyPoller{r: r, rnd: rnd, p: make([]schedule.Policy, len(r.models)), factor: knobs}
		for m := range r.models {
			pp.p[m] = r.cfg.Policy
		}
		if s.kind != seedTable {
			for m, c := range knobs {
				pp.p[m].PollCost = dur(c)
			}
			pp.factor = nil
			pp.learn = make([]learner, len(r.models))
			pp.webhooks = s.kind == adaptive
		}
		return pp
	case optimal, population:
		pp := &planPoller{r: r, plans: make([]*schedule.Plan, len(r.models)), webhookPlans: make([]*schedule.Plan, len(r.models))}
		for m := range r.models {
			p := r.cfg.Policy
			p.PollCost = dur(knobs[m])
			md := &r.models[m]
			if s.kind == population {
				md = md.population
			}
			pp.plans[m] = md.plan(p)
			pp.webhookPlans[m] = md.webhookPlan(p)
		}
		return pp
	}
	return &backoffPoller{r: r, s: s, factor: knobs, rnd: rnd}
}

// policyPoller asks schedule.Policy, as the Pollux poller does: with the
// model's median as the submission's expected duration, and for adaptive
// with the distributions learned so far.
type policyPoller struct {
	r      *run
	p      []schedule.Policy // by model
	rnd    []*rand.Rand      // by model
	factor []float64         // by model; nil: 1
	learn  []learner         // by model; nil: the cold start only
	// webhooks: the policy is given the webhooks' learned reliability.
	webhooks bool
}

// learner is one model's learned distributions. The policy sees a copy
// refreshed every Config.Refresh completions, as a poller process sees the
// pollux-stats bucket through its cache.
type learner struct {
	total, run         schedule.Dist // every completion so far
	seenTotal, seenRun schedule.Dist // what the policy is given
	fresh              int           // completions since the copy
	// webhook is the reliability of the model's webhooks, learned as the
	// fleet learns a route's (internal/core/learn); miss and late are what the
	// policy is given, refreshed with the Dists.
	webhook learn.WebhookRecord
	miss    float64
	late    time.Duration
	// ends is how the model's jobs end, learned as the fleet learns it
	// (internal/core/learn): run holds the succeeded jobs' run times, ends the
	// others' times from acceptance. seenFailed and share are what the
	// policy is given, refreshed with the Dists.
	ends       learn.Ends
	seenFailed schedule.Dist
	share      float64
}

// webhookDecay is internal/core/learn's decay of a webhook record per job (a
// half-life of 500 jobs).
var webhookDecay = math.Exp2(-1.0 / 500)

// unsureWithin is internal/core/learn's least time after a job's end within
// which a poll that found it ended is no miss: the webhook may have been on
// its way.
const unsureWithin = 5 * time.Second

func (pp *policyPoller) next(i int, st *jobState, now float64) float64 {
	j := &pp.r.jobs[i]
	m := pp.r.model[i]
	sj := schedule.Job{
		Now: at(now), Submitted: at(j.Submit), Phase: st.phase,
		Polls: int(st.polls), Unchanged: int(st.unchanged),
		Expected: dur(pp.r.models[m].median), WebhookExpected: j.Webhook,
	}
	if pp.learn != nil {
		l := &pp.learn[m]
		sj.Learned, sj.LearnedRun = &l.seenTotal, &l.seenRun
		if l.share > 0 {
			sj.LearnedFailed, sj.FailedShare = &l.seenFailed, l.share
		}
		if j.Webhook && pp.webhooks {
			sj.WebhookMiss, sj.WebhookLate = l.miss, l.late
		}
		if st.phase == schedule.PhaseRunning {
			sj.StartedAt = at(j.Submit + j.Queue) // the provider's timestamp
			sj.Progress = st.progress
		}
	}
	d := secs(pp.p[m].Next(sj, pp.rnd[m]))
	if pp.factor != nil {
		d *= pp.factor[m]
	}
	return d
}

func (pp *policyPoller) done(i int, now float64, byWebhook bool) {
	if pp.learn == nil {
		return
	}
	j := &pp.r.jobs[i]
	l := &pp.learn[pp.r.model[i]]
	ok := j.Outcome == "succeeded"
	l.total.Observe(dur(j.Duration))
	if j.ran() && ok {
		l.run.Observe(dur(j.Duration - j.Queue))
	}
	l.ends.Observe(dur(j.Duration), ok)
	if j.Webhook && pp.webhooks {
		l.observeWebhook(dur(now-j.end()), byWebhook)
	}
	if l.fresh++; l.fresh >= pp.r.cfg.Refresh {
		l.seenTotal, l.seenRun, l.fresh = l.total, l.run, 0
		l.seenFailed, l.share = l.ends.Times, l.ends.Share()
		if t := l.ends.Total(); t != nil {
			l.seenTotal = *t
		}
		l.miss, l.late = l.webhook.Miss(), l.webhook.Lateness()
	}
}

// observeWebhook learns from a job expecting a webhook, found late after
// its end, as internal/core/learn does: a delivery and its lateness, or a miss
// when a poll found the end first — unless it found it so soon that the
// webhook may have been on its way.
func (l *learner) observeWebhook(late time.Duration, byWebhook bool) {
	w := &l.webhook
	if !byWebhook && late > 0 && late < max(2*l.late, unsureWithin) {
		return
	}
	w.Delivered *= webhookDecay
	w.Missed *= webhookDecay
	if !byWebhook {
		w.Missed++
		return
	}
	w.Delivered++
	w.Late.Observe(late)
}

// planPoller follows each model's plan of its true distribution (its
// jobs', or its population's), without jitter or per-job signals; a job
// expecting a webhook, the webhook plan of the true distribution and
// webhooks.
type planPoller struct {
	r                   *run
	plans, webhookPlans []*schedule.Plan // by model
}

func (pp *planPoller) next(i int, _ *jobState, now float64) float64 {
	j := &pp.r.jobs[i]
	pl := pp.plans[pp.r.model[i]]
	if j.Webhook {
		pl = pp.webhookPlans[pp.r.model[i]]
	}
	return secs(pl.Delay(dur(now - j.Submit)))
}

func (*planPoller) done(int, float64, bool) {}

// backoffPoller is a static strategy of the SDKs, its delays multiplied by
// factor.
type backoffPoller struct {
	r      *run
	s      Strategy
	factor []float64    // by model
	rnd    []*rand.Rand // by model
}

// Google's LRO polling and Smithy's waiters, as the SDKs define them.
const (
	googleInitial, googleFactor, googleMax = 1.0, 1.5, 20.0
	smithyMin, smithyMax                   = 2.0, 120.0
)

// smithyCeiling is the waiter spec's attempt ceiling:
// ⌊log2(max/min)⌋ + 1 attempts double the delay, later ones use max.
var smithyCeiling = int32(math.Log2(smithyMax/smithyMin) + 1)

func (bp *backoffPoller) next(i int, st *jobState, _ float64) float64 {
	m := bp.r.model[i]
	rnd := bp.rnd[m]
	var d float64
	switch bp.s.kind {
	case fixed:
		d = bp.s.every
	case google: // full jitter: uniform in [0, min(max, initial·factor^n)]
		d = rnd.Float64() * min(googleMax, googleInitial*math.Pow(googleFactor, float64(st.polls)))
	case smithy: // attempt a ≥ 1: uniform in [min, min·2^(a−1)], max past the ceiling
		hi := smithyMax
		if a := st.polls + 1; a <= smithyCeiling {
			hi = smithyMin * math.Exp2(float64(a-1))
		}
		d = unif(rnd, smithyMin, hi)
	}
	return d * bp.factor[m]
}

func (*backoffPoller) done(int, float64, bool) {}
