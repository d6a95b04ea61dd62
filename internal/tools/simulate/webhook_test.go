package simulate

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

// every polls at a fixed interval and records how each job was found.
type every struct {
	gap       float64
	byWebhook map[int]bool
}

func (e *every) next(int, *jobState, float64) float64 { return e.gap }
func (e *every) done(i int, _ float64, byWebhook bool) {
	_, twice := e.byWebhook[i]
	if twice {
		panic("a job found twice")
	}
	e.byWebhook[i] = byWebhook
}

// A job expecting a webhook is resolved by it when it comes before a poll
// sees the end, with no poll after; a lost webhook is found by a poll
// only; a poll that sees the end first resolves the job, and the webhook
// after it is ignored.
func TestWebhookResolvesUnlessLost(t *testing.T) {
	t.Parallel()
	jobs := []Job{
		{Model: "m", Submit: 0, Queue: 1, Duration: 25, Webhook: true, WebhookLate: 2},                    // webhook at 27, before the poll at 30
		{Model: "m", Submit: 1, Queue: 1, Duration: 25, Webhook: true, WebhookLost: true, WebhookLate: 2}, // lost: the poll at 31
		{Model: "m", Submit: 2, Queue: 1, Duration: 27, Webhook: true, WebhookLate: 4},                    // the poll at 32 beats the webhook at 33
		{Model: "m", Submit: 3, Queue: 1, Duration: 25},                                                   // no webhook: the poll at 33
	}
	r := mustRun(t, jobs, Config{}.withDefaults())
	e := &every{gap: 10, byWebhook: map[int]bool{}}
	out := r.replay(e)
	require.Equal(t, []int32{2, 3, 3, 3}, out.polls, "polls at 10 and 20 only for the job its webhook resolved")
	for i, want := range []float64{2, 5, 3, 5} {
		require.InDelta(t, want, out.delay[i], 1e-9, "job %d", i)
	}
	require.Equal(t, map[int]bool{0: true, 1: false, 2: false, 3: false}, e.byWebhook)
}

// The webhook workloads: the same jobs as lognormal-0.5's at every miss
// chance, each expecting a webhook, lost at that chance (the lost at 2%
// lost at 10% too), else coming about a second after the end.
func TestWebhookWorkloads(t *testing.T) {
	t.Parallel()
	var prev []Job
	for _, m := range []float64{0.02, 0.1, 0.3} {
		w, err := LookupWorkload("webhook-" + map[float64]string{0.02: "2%", 0.1: "10%", 0.3: "30%"}[m])
		require.NoError(t, err)
		jobs := w.Jobs(5000, 1)
		lost := 0
		var lates []float64
		for i, j := range jobs {
			require.True(t, j.Webhook)
			if j.WebhookLost {
				lost++
			}
			lates = append(lates, j.WebhookLate)
			if prev != nil {
				require.Equal(t, prev[i].Duration, j.Duration)
				require.Equal(t, prev[i].WebhookLate, j.WebhookLate)
				require.True(t, j.WebhookLost || !prev[i].WebhookLost, "nested")
			}
		}
		require.InDelta(t, m, float64(lost)/5000, 0.01)
		slices.Sort(lates)
		require.InEpsilon(t, 1, lates[len(lates)/2], 0.1, "median lateness")
		prev = jobs
	}
}

// The true distribution handed to WebhookPlan is the durations' histogram,
// undecayed: its quantiles are the durations', to a bin (9%).
func TestHistogramIsTheDistOfTheDurations(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(1, 1))
	xs := make([]float64, 5000)
	for i := range xs {
		xs[i] = lognormal(rnd, 90, 0.7)
	}
	d, err := histogram(xs)
	require.NoError(t, err)
	require.InDelta(t, 5000, d.Weight(), 1e-9, "every duration, undecayed")
	slices.Sort(xs)
	for _, q := range []float64{0.01, 0.1, 0.5, 0.9, 0.99} {
		require.InEpsilon(t, rank(xs, q), d.Quantile(q).Seconds(), 0.09, "q %v", q)
	}
}

// adaptive learns a model's webhook reliability as the fleet does and
// hands it to the policy; adaptive-fixed-quiet does not, and seed-table
// knows only that a webhook is expected.
func TestAdaptiveIsGivenTheWebhookReliability(t *testing.T) {
	t.Parallel()
	w, _ := LookupWorkload("webhook-10%")
	r := mustRun(t, w.Jobs(3000, 1), Config{Warmup: 100}.withDefaults())
	s, _ := ParseStrategy("adaptive")
	pp := r.newPoller(s, r.same(2), r.rands(s)).(*policyPoller)
	r.replay(pp)
	l := &pp.learn[0]
	require.InDelta(t, r.models[0].webhook.miss, l.miss, 0.04)
	require.InEpsilon(t, r.models[0].webhook.late.Seconds(), l.late.Seconds(), 0.3)

	st := &jobState{polls: 1, phase: schedule.PhaseRunning}
	j := &r.jobs[5]
	base := schedule.Job{Now: at(j.Submit + 100), Submitted: at(j.Submit), Phase: schedule.PhaseRunning, Polls: 1,
		Expected: dur(r.models[0].median), WebhookExpected: true}
	learned := base
	learned.Learned, learned.LearnedRun, learned.StartedAt = &l.seenTotal, &l.seenRun, at(j.Submit+j.Queue)
	withMiss := learned
	withMiss.WebhookMiss, withMiss.WebhookLate = l.miss, l.late
	policy := r.cfg.Policy
	pp.rnd = []*rand.Rand{rand.New(rand.NewPCG(4, 4))}
	require.InDelta(t, policy.Next(withMiss, rand.New(rand.NewPCG(4, 4))).Seconds(),
		pp.next(5, st, j.Submit+100), 1e-9)

	fq, _ := ParseStrategy(FixedQuietName)
	fp := r.newPoller(fq, r.same(2), []*rand.Rand{rand.New(rand.NewPCG(4, 4))}).(*policyPoller)
	fp.learn[0].seenTotal, fp.learn[0].seenRun = l.seenTotal, l.seenRun
	require.InDelta(t, policy.Next(learned, rand.New(rand.NewPCG(4, 4))).Seconds(), fp.next(5, st, j.Submit+100), 1e-9)

	seed, _ := ParseStrategy("seed-table")
	sp := r.newPoller(seed, r.same(1), []*rand.Rand{rand.New(rand.NewPCG(4, 4))})
	require.InDelta(t, policy.Next(base, rand.New(rand.NewPCG(4, 4))).Seconds(), sp.next(5, st, j.Submit+100), 1e-9)
}

// A miss is a job whose end a poll found first, but not within twice the
// learned lateness (at least 5 s) of the end; a delivery teaches its
// lateness.
func TestLearnerCountsMisses(t *testing.T) {
	t.Parallel()
	var l learner
	l.observeWebhook(3*time.Second, false) // maybe on its way
	require.Zero(t, l.webhook.Missed)
	l.observeWebhook(6*time.Second, false)
	require.InDelta(t, 1, l.webhook.Missed, 1e-12)
	l.late = 4 * time.Second
	l.observeWebhook(7*time.Second, false) // within 2 × 4 s
	require.InDelta(t, 1, l.webhook.Missed, 1e-12)
	l.observeWebhook(1500*time.Millisecond, true)
	require.InDelta(t, 1, l.webhook.Delivered, 1e-12)
	require.InDelta(t, webhookDecay, l.webhook.Missed, 1e-12, "decayed by one job")
	require.InDelta(t, 1.5, l.webhook.Late.Quantile(0.5).Seconds(), 0.15)
}

// On webhook jobs Run adds adaptive-fixed-quiet; optimal follows the
// webhook plan of the true miss chance and lies on its frontier; with
// 30% of the webhooks lost, the learned miss chance finds them far sooner
// than the fixed quiet period.
func TestRunWithWebhooks(t *testing.T) {
	t.Parallel()
	w, _ := LookupWorkload("webhook-30%")
	strategies := []Strategy{{Name: "adaptive", kind: adaptive}, {Name: "optimal", kind: optimal}}
	res, err := Run(w.Jobs(2000, 1), strategies, Config{Warmup: 100})
	require.NoError(t, err)
	require.Len(t, res.Scores, 3)
	require.Equal(t, FixedQuietName, res.Scores[1].Strategy)
	ad, fq, opt := score(t, res, w.Name, "adaptive"), score(t, res, w.Name, FixedQuietName), score(t, res, w.Name, "optimal")
	// The plan takes the lateness as one figure (its 90th percentile), so
	// the plans across poll costs scatter a few percent about their hull.
	require.InDelta(t, 1, *opt.Ratio, 0.08)
	require.Less(t, ad.MeanDelayS, fq.MeanDelayS/2)
	require.Less(t, *ad.Ratio, 1.1)
	require.Less(t, ad.PollsPerJob, 3.0, "the webhook resolves most jobs")
	require.False(t, math.IsNaN(ad.MeanDelayS))
}

// A webhook model's panel reaches down to 0.1 polls a job, where its
// frontier lies; the others start at 1.
func TestPlotOfWebhooksReachesBelowOnePoll(t *testing.T) {
	t.Parallel()
	w, _ := LookupWorkload("webhook-10%")
	res, err := Run(w.Jobs(800, 1), []Strategy{{Name: "optimal", kind: optimal}}, Config{Warmup: 50, Sweep: true})
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, WritePlot(&b, res))
	require.Contains(t, b.String(), `text-anchor="end">0.1</text>`)
	b.Reset()
	require.NoError(t, WritePlot(&b, smallRun(t)))
	require.NotContains(t, b.String(), `text-anchor="end">0.1</text>`)
}
