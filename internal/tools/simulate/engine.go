package simulate

import (
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

// run is the shared, read-only input of one simulation: the jobs, their
// models and each model's true distribution.
type run struct {
	cfg    Config
	jobs   []Job
	model  []int32 // jobs[i]'s index in models
	models []model
}

// model is what the simulation knows of one model: the truth, used by
// optimal, the frontier and as the submission's hint, never by adaptive.
type model struct {
	name      string
	durations []float64 // every job's, sorted
	median    float64
	scored    []int // indexes of the jobs scored: all but the first Warmup
	progress  bool  // some job reports its progress
	// webhook, when some of the model's jobs expect a webhook, is the
	// truth of their webhooks.
	webhook *webhookTruth
	// population is the same model in Config.Population; nil without.
	population *model
}

func newRun(jobs []Job, cfg Config) (*run, error) {
	r := &run{cfg: cfg, jobs: jobs, model: make([]int32, len(jobs))}
	index := map[string]int32{}
	webhooks := map[int32][]*Job{}
	for i := range jobs {
		m, ok := index[jobs[i].Model]
		if !ok {
			m = int32(len(r.models))
			index[jobs[i].Model] = m
			r.models = append(r.models, model{name: jobs[i].Model})
		}
		r.model[i] = m
		md := &r.models[m]
		if len(md.durations) >= cfg.Warmup {
			md.scored = append(md.scored, i)
		}
		md.durations = append(md.durations, jobs[i].Duration)
		md.progress = md.progress || jobs[i].ProgressStep > 0
		if jobs[i].Webhook {
			webhooks[m] = append(webhooks[m], &jobs[i])
		}
	}
	for m := range r.models {
		md := &r.models[m]
		slices.Sort(md.durations)
		md.median = md.durations[len(md.durations)/2]
		if wj := webhooks[int32(m)]; len(wj) > 0 {
			var err error
			if md.webhook, err = newWebhookTruth(wj); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// survival is the model's true P(T > t).
func (md *model) survival(t time.Duration) float64 {
	x := t.Seconds()
	n := len(md.durations)
	return float64(n-sort.SearchFloat64s(md.durations, x+1e-12)) / float64(n)
}

// webhookPlan is the cost-optimal plan of the reconciliation polls of the
// model's jobs expecting a webhook, by the truth of their durations and
// webhooks; nil when none expects one.
func (md *model) webhookPlan(p schedule.Policy) *schedule.Plan {
	if md.webhook == nil {
		return nil
	}
	return p.WebhookPlan(md.webhook.dist, md.webhook.miss, md.webhook.late)
}

// plan is the cost-optimal plan of the model's true distribution, to its
// 99.9th percentile as for a learned one.
func (md *model) plan(p schedule.Policy) *schedule.Plan {
	horizon := md.durations[min(len(md.durations)-1, int(0.999*float64(len(md.durations))))]
	return p.PlanSurvival(md.survival, dur(horizon))
}

// outcome is every job's polls and detection delay under one strategy.
type outcome struct {
	polls []int32
	delay []float64 // seconds from the terminal state to its detection
}

// simulate runs one strategy over all the jobs on a virtual clock. Events
// are processed in time order, a poll before a submission at the same
// instant, so a learning strategy knows exactly the completions detected
// before each decision, and nothing later.
func (r *run) simulate(s Strategy, knobs []float64) outcome {
	return r.replay(r.newPoller(s, knobs, r.rands(s)))
}

// rands are a strategy's random streams, one a model, each a function of
// the seed, the strategy and the model's name alone: a model's figures are
// the same whether it runs alone or in a mix.
func (r *run) rands(s Strategy) []*rand.Rand {
	rs := make([]*rand.Rand, len(r.models))
	for m := range rs {
		h := fnv.New64a()
		h.Write([]byte(r.models[m].name))
		rs[m] = rand.New(rand.NewPCG(r.cfg.Seed, uint64(s.kind)^h.Sum64()))
	}
	return rs
}

// replay runs one poller over all the jobs. A job expecting a webhook is
// also resolved by it, unless it is lost: at its end plus its lateness,
// when no poll found the end first; the poll due next is then dropped,
// not made.
func (r *run) replay(p poller) outcome {
	out := outcome{polls: make([]int32, len(r.jobs)), delay: make([]float64, len(r.jobs))}
	state := make([]jobState, len(r.jobs))
	var q queue
	next := 0 // the next job to submit
	for next < len(r.jobs) || len(q) > 0 {
		if next < len(r.jobs) && (len(q) == 0 || r.jobs[next].Submit < q[0].at) {
			now := r.jobs[next].Submit
			j := &r.jobs[next]
			if j.Webhook && !j.WebhookLost {
				q.push(event{at: j.end() + j.WebhookLate, job: int32(next), webhook: true})
			}
			q.push(event{at: now + p.next(next, &state[next], now), job: int32(next)})
			next++
			continue
		}
		e := q.pop()
		i, now := int(e.job), e.at
		j, st := &r.jobs[i], &state[i]
		if st.resolved {
			continue // the poll after a webhook, or the webhook after a poll
		}
		if e.webhook {
			st.resolved = true
			out.polls[i], out.delay[i] = st.polls, now-j.end()
			p.done(i, now, true)
			continue
		}
		st.polls++
		if now >= j.end() {
			st.resolved = true
			out.polls[i], out.delay[i] = st.polls, now-j.end()
			p.done(i, now, false)
			continue
		}
		phase := schedule.PhaseRunning
		if now < j.Submit+j.Queue {
			phase = schedule.PhaseQueued
		}
		progress := 0.0
		if phase == schedule.PhaseRunning {
			progress = j.progressAt(i, now)
		}
		if phase == st.phase && progress == st.progress {
			st.unchanged++
		} else {
			st.phase, st.progress, st.unchanged = phase, progress, 0
		}
		q.push(event{at: now + p.next(i, st, now), job: e.job})
	}
	return out
}

// event is a poll due at a virtual time, or a job's webhook.
type event struct {
	at      float64
	job     int32
	webhook bool
}

// queue is a binary min-heap of events by time (container/heap would box
// every event).
type queue []event

func (q *queue) push(e event) {
	*q = append(*q, e)
	h := *q
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if h[parent].at <= h[i].at {
			break
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
}

func (q *queue) pop() event {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, small := 2*i+1, i
		if l < len(h) && h[l].at < h[small].at {
			small = l
		}
		if r := l + 1; r < len(h) && h[r].at < h[small].at {
			small = r
		}
		if small == i {
			break
		}
		h[i], h[small] = h[small], h[i]
		i = small
	}
	*q = h
	return top
}
