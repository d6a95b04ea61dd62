package schedule

import (
	"math"
	"sync"
	"time"
)

// Plan is the cost-optimal polling plan for one distribution of job
// durations T: the poll times that minimise
//
//	E[polls] + E[detection delay] / PollCost
//
// with every interval between polls (and the first, from submission)
// within [MinDelay, MaxDelay]. Durations are real time. A Plan is
// immutable and safe for concurrent use.
//
// It is solved by dynamic programming on a time grid. With S(t) = P(T > t)
// and polls at t₀ = 0 < t₁ < t₂ < …, the poll at tᵢ₊₁ happens when
// T > tᵢ, and a job ending in (tᵢ, tᵢ₊₁] is seen at tᵢ₊₁, so
//
//	E[polls] = Σ S(tᵢ)      E[delay] = Σ S(tᵢ)·(tᵢ₊₁ − tᵢ) − E[T]
//
// and, E[T] being fixed, the cost to go from an unfinished poll at s is
//
//	W(s) = min over t in [s+MinDelay, s+MaxDelay] of S(s)·(1 + (t−s)/PollCost) + W(t).
//
// W(s)/S(s) is the expected cost given T > s, and conditioning on T > s
// divides every later S(t) by the same S(s): the argmin does not change.
// So the plan's next poll after an unfinished poll at any elapsed time s is
// also the optimal plan for the conditional distribution of a job known to
// be running at s — one table serves every continuation, including after
// a poll the jitter, a provider's hint or an error moved off the plan.
//
// The grid spans [0, H], H the 99.9th percentile, in at most 2048 cells of
// at least MaxDelay/128; a job outlasting H is polled every MaxDelay.
type Plan struct {
	step   float64 // seconds per cell
	next   []int32 // next[i]: the cell of the poll after an unfinished poll at cell i
	minGap float64 // seconds
	maxGap float64
	// firstGap bounds the delay from the first cell: maxGap, but longer
	// for a webhook plan's quiet period.
	firstGap float64
	polls    float64 // expected polls within the horizon
	delay    float64 // expected detection delay within the horizon, seconds
}

// Grid limits: the work of a build is at most maxCells·maxWindow steps.
const (
	maxCells  = 2048
	maxWindow = 128
	// tailMass is the share of jobs beyond the horizon of a plan learned
	// from a Dist.
	tailMass = 1e-3
)

// costs are a policy's plan parameters in real seconds.
type costs struct {
	cost, minGap, maxGap float64
}

// costs converts the policy's model-time settings to real seconds.
func (p Policy) costs() costs {
	minGap := max(p.MinDelay.Seconds()/p.Scale, hardFloor.Seconds())
	return costs{
		cost:   p.PollCost.Seconds() / p.Scale,
		minGap: minGap,
		maxGap: max(p.MaxDelay.Seconds()/p.Scale, minGap),
	}
}

// Plan returns the policy's plan for a learned distribution, from a cache
// shared by the process (keyed by the distribution's contents and the
// policy's PollCost, MinDelay, MaxDelay and Scale), building it on a miss
// (50–250 µs). The histogram is smoothed first: a plan fitted to the noise
// of ~70 observations polls where no job will end.
func (p Policy) Plan(d *Dist) *Plan { return p.WithDefaults().plan(d) }

// plan is Plan for a policy with its defaults filled in.
func (p Policy) plan(d *Dist) *Plan {
	c := p.costs()
	key := planKey{dist: d.id, cost: seconds(c.cost), minGap: seconds(c.minGap), maxGap: seconds(c.maxGap)}
	if pl := plans.get(key); pl != nil {
		return pl
	}
	pl := build(d, c)
	plans.put(key, pl)
	return pl
}

// build solves the plan of a learned distribution, smoothed first.
func build(d *Dist, c costs) *Plan {
	sd := d.smoothed()
	step, n := grid(sd.Quantile(1-tailMass).Seconds(), c)
	s := make([]float64, n)
	sd.survivalGrid(s, step)
	return solve(s, step, c, nil)
}

// WebhookPlan returns the policy's plan for the reconciliation polls of a
// job expecting a webhook: durations distributed as d, the webhook never
// arriving with probability miss and otherwise arriving late after the
// job ends. Its first poll may wait up to d's median plus WebhookGrace —
// the cold-start table's quiet period for a job expected to take d's
// median — and later ones up to Reconcile. (The fixed wait it replaces,
// d's 90th percentile plus the grace, was the bound once: a plan for
// rare misses then waited it out, and found a lost webhook's job later
// than the table, at the mean, for fewer polls: webhook-2% in pollux
// simulate, 3.0 s against 2.5 s.)
//
// A poll at b after an unresolved one at a happens when the job was still
// running at a and no webhook resolved it by b; it finds a job that ended
// in (a, b] only when the webhook is missing, so the delay counts only
// then. With S(t) = P(T > t) and Sw(t) = P(T + late > t), the cost of the
// interval is
//
//	miss·S(a)·(1 + (b−a)/PollCost) + (1−miss)·Sw(b)
//
// and the same dynamic programme as Plan's solves it (the added Sw(b)
// depends on b alone, so the Monge argument still holds). A miss of 1 is
// Plan's problem; a small one waits long and polls seldom. Plans are
// cached like Plan's, keyed by miss to 1/1000 and late to 1/10 s.
func (p Policy) WebhookPlan(d *Dist, miss float64, late time.Duration) *Plan {
	return p.WithDefaults().webhookPlan(d, miss, late)
}

// webhookFirstQuantile is the quantile of the durations a webhook plan's
// first poll waits for at most, plus WebhookGrace (see WebhookPlan).
const webhookFirstQuantile = 0.5

// minWebhookMiss is the least miss chance a webhook plan assumes: a route
// whose webhooks never failed yet still reconciles.
const minWebhookMiss = 0.005

func (p Policy) webhookPlan(d *Dist, miss float64, late time.Duration) *Plan {
	c := p.costs()
	miss = math.Round(min(max(miss, minWebhookMiss), 1)*1000) / 1000
	late = max(late, 0).Round(100 * time.Millisecond)
	grace := p.real(p.WebhookGrace)
	c.maxGap = max(p.real(p.Reconcile).Seconds(), c.minGap)
	key := planKey{dist: d.id, cost: seconds(c.cost), minGap: seconds(c.minGap), maxGap: seconds(c.maxGap),
		grace: grace, miss: int32(miss * 1000), late: late}
	if pl := plans.get(key); pl != nil {
		return pl
	}
	sd := d.smoothed()
	first := max(sd.Quantile(webhookFirstQuantile).Seconds()+grace.Seconds(), c.maxGap)
	step, n := grid(max(sd.Quantile(1-tailMass).Seconds(), first), c)
	s, sw := make([]float64, n), make([]float64, n)
	sd.survivalGrid(s, step)
	shift := late.Seconds() / step
	for i := range sw {
		// Sw(t) = S(t − late), read between cells.
		x := float64(i) - shift
		switch k := int(math.Floor(x)); {
		case x <= 0:
			sw[i] = 1
		case k+1 < n:
			f := x - float64(k)
			sw[i] = s[k]*(1-f) + s[k+1]*f
		default:
			sw[i] = s[n-1]
		}
	}
	pl := solve(s, step, c, &webhook{miss: miss, sw: sw, first: int(first / step), late: late.Seconds()})
	plans.put(key, pl)
	return pl
}

// webhook weights a plan by a webhook's chance to resolve the job first
// (see WebhookPlan).
type webhook struct {
	miss  float64   // the chance the webhook never comes
	sw    []float64 // sw[i] = P(the webhook has not come by cell i | it will)
	first int       // the longest first gap, in cells
	late  float64   // seconds from the job's end to its webhook
}

// PlanSurvival builds (without caching) the policy's plan for durations
// whose survival function is survival(t) = P(T > t), planned up to
// horizon; after it the plan polls every MaxDelay.
func (p Policy) PlanSurvival(survival func(t time.Duration) float64, horizon time.Duration) *Plan {
	p = p.WithDefaults()
	c := p.costs()
	step, n := grid(horizon.Seconds(), c)
	s := make([]float64, n)
	for i := range s {
		s[i] = min(1, max(0, survival(seconds(float64(i)*step))))
	}
	return solve(s, step, c, nil)
}

// grid chooses the cell size and count for a horizon in seconds.
func grid(horizon float64, c costs) (step float64, n int) {
	step = max(horizon/maxCells, c.maxGap/maxWindow, 1e-3)
	return step, max(1, int(math.Ceil(horizon/step)))
}

// solve runs the dynamic programme on s[i] = P(T > i·step); beyond the grid
// S is taken as 0. With wh, the job expects a webhook (see WebhookPlan).
func solve(s []float64, step float64, c costs, wh *webhook) *Plan {
	n := len(s)
	perCell := step / c.cost // the delay cost of one cell, in polls
	ka := max(1, int(math.Ceil(c.minGap/step-1e-9)))
	kb := max(ka, int(c.maxGap/step+1e-9))
	miss := 1.0
	if wh != nil {
		miss = wh.miss
	}
	w := make([]float64, n+1) // w[n] = 0: nothing to pay past the horizon
	// v[j] is what a poll at j costs from there on, beyond what the
	// interval that ends at j pays: W(j), plus (1−miss)·Sw(j) with a webhook.
	v := w
	if wh != nil {
		v = make([]float64, n+1)
	}
	next := make([]int32, n)
	bound := n // next[i+1]: see below
	for i := n - 1; i >= 0; i-- {
		slope := miss * s[i] * perCell
		// The cost f(i,j) = S(i)·(1 + (j−i)·perCell) + W(j) is Monge:
		// f(i,j) + f(i',j') − f(i,j') − f(i',j) = perCell·(j−j')·(S(i)−S(i'))
		// ≤ 0 for i < i', j < j', also with the band of allowed gaps, and
		// with terms in j alone added. So the latest optimal next poll
		// never decreases with i, and row i need not look past row i+1's
		// choice — but for a webhook's first poll, which may look further.
		lo, hi := min(i+ka, n), min(i+kb, bound)
		if wh != nil && i == 0 {
			hi = min(max(wh.first, kb), n)
		}
		best, bj := math.Inf(1), hi
		gap := float64(lo - i)
		for j, vj := range v[lo : hi+1] {
			// <= prefers the later poll on a tie: fewer polls.
			if x := slope*gap + vj; x <= best {
				best, bj = x, lo+j
			}
			gap++
		}
		w[i] = miss*s[i] + best
		if wh != nil {
			v[i] = w[i] + (1-miss)*wh.sw[i]
		}
		next[i] = int32(bj)
		bound = bj
	}

	pl := &Plan{step: step, next: next, minGap: c.minGap, maxGap: c.maxGap, firstGap: c.maxGap}
	area := 0.0 // ∫ S over the grid (trapezoids; S = 0 at the horizon)
	for i, v := range s {
		area += v
		if i == 0 {
			area -= v / 2
		}
	}
	for i := 0; i < n; i = int(next[i]) {
		pl.polls += miss * s[i]
		if j := int(next[i]); wh != nil && j < n {
			pl.polls += (1 - miss) * wh.sw[j]
		}
		pl.delay += s[i] * float64(int(next[i])-i) * step
	}
	// Only a job whose webhook is missing waits for a poll; the others
	// are found when their webhook comes.
	pl.delay = miss * max(0, pl.delay-area*step)
	if wh != nil {
		pl.firstGap = max(pl.maxGap, float64(wh.first)*step)
		pl.delay += (1 - miss) * wh.late
	}
	return pl
}

// Delay returns how long to wait after a poll at elapsed (since the job
// was accepted, or since it started for a plan of run times) that found
// the job unfinished.
func (pl *Plan) Delay(elapsed time.Duration) time.Duration {
	x := max(elapsed.Seconds(), 0)
	i := int(x / pl.step)
	if i >= len(pl.next) {
		return seconds(pl.maxGap)
	}
	t := float64(pl.next[i]) * pl.step
	return min(seconds(max(t-x, pl.minGap)), pl.longest(elapsed))
}

// longest is the longest delay the plan allows after a poll at elapsed:
// its first gap from the first cell, else MaxDelay (Reconcile for a
// webhook plan).
func (pl *Plan) longest(elapsed time.Duration) time.Duration {
	if int(max(elapsed.Seconds(), 0)/pl.step) == 0 {
		return seconds(pl.firstGap)
	}
	return seconds(pl.maxGap)
}

// Times returns the plan's first n poll times, from submission.
func (pl *Plan) Times(n int) []time.Duration {
	ts := make([]time.Duration, 0, n)
	var t time.Duration
	for range n {
		t += pl.Delay(t)
		ts = append(ts, t)
	}
	return ts
}

// Expected returns the plan's expected polls per job and mean detection
// delay, for the distribution it was built from, leaving out the jobs that
// outlast its horizon. A webhook plan's delay counts a delivered webhook's
// lateness, and its polls stop at the webhook.
func (pl *Plan) Expected() (polls float64, delay time.Duration) {
	return pl.polls, seconds(pl.delay)
}

// planKey identifies a plan in the cache (integers hash faster than
// floats).
type planKey struct {
	dist                 uint64
	cost, minGap, maxGap time.Duration
	// A webhook plan's WebhookGrace, miss chance (in thousandths) and
	// lateness; zero for Plan.
	grace time.Duration
	miss  int32
	late  time.Duration
	// A plan of a job's end (endsPlan): the failures' Dist, their share
	// (in thousandths) and the job's time to its start; zero for Plan.
	failed uint64
	share  int32
	shift  time.Duration
}

// planCacheSize bounds the cache: a plan takes up to 8 KiB.
const planCacheSize = 512

// planCache is a bounded map from key to plan, evicting the oldest entry.
type planCache struct {
	mu   sync.Mutex
	m    map[planKey]*Plan
	ring [planCacheSize]planKey
	head int
}

var plans = &planCache{m: make(map[planKey]*Plan, planCacheSize)}

func (c *planCache) get(k planKey) *Plan {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *planCache) put(k planKey, pl *Plan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		return
	}
	if len(c.m) == planCacheSize {
		delete(c.m, c.ring[c.head])
	}
	c.ring[c.head] = k
	c.head = (c.head + 1) % planCacheSize
	c.m[k] = pl
}
