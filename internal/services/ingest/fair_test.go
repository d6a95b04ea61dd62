package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/internal/testkit/stack"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

// turnover is a provider whose jobs are created in the order it records.
type turnover struct {
	*fake
	mu      sync.Mutex
	order   []string
	created chan string
}

func (p *turnover) Submit(ctx context.Context, req provider.SubmitRequest) (provider.Status, error) {
	st, err := p.fake.Submit(ctx, req)
	if err == nil {
		p.mu.Lock()
		p.order = append(p.order, req.JobID)
		p.mu.Unlock()
		p.created <- req.JobID
	}
	return st, err
}

func (p *turnover) started() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.order...)
}

// Fair share: tenant A publishes 5,000 jobs, then tenant B 20, on a route
// of 5 running slots whose jobs each run 300 ms; B's jobs all start before
// 5% of A's have, and each tenant's start in the order they came.
func TestFairShareAcrossTenants(t *testing.T) {
	if testing.Short() {
		t.Skip("5,000 submissions")
	}
	t.Parallel()
	p := &turnover{fake: newFake(), created: make(chan string, 10_000)}
	s := start(t, p, config.Route{Budgets: config.Budgets{Running: 5}, TenantKey: "tenant", Workers: config.Workers{Submit: 16}}, nil)
	// Jobs end 300 ms after they start, as the poller would see it.
	endAfter(t, s, p.created, 300*time.Millisecond, nil)
	publish := func(tenant string, n int) []string {
		return s.submitAs(tenant, fmt.Sprintf("%s-%%04d", strings.ToLower(tenant)), n)
	}
	publish("A", 5000)
	bs := publish("B", 20)
	// Fairness is measured from when B's jobs wait in the queue: how long
	// ingest takes to get through A's 5,000 submissions to B's is the
	// machine's speed, not the queue's choice.
	aWhenBWaited := -1
	require.Eventually(t, func() bool {
		started := p.started()
		for _, id := range bs {
			if slices.Contains(started, id) {
				continue
			}
			j, err := s.Jobs.Get(context.Background(), id)
			if err != nil || j.WaitingFor == "" {
				return false
			}
		}
		aWhenBWaited = countOf(started, 'a')
		return true
	}, 120*time.Second, 20*time.Millisecond, "B's jobs wait in the queue")
	require.Eventually(t, func() bool {
		started := p.started()
		for _, id := range bs {
			if !slices.Contains(started, id) {
				return false
			}
		}
		return true
	}, 60*time.Second, 20*time.Millisecond, "B's jobs start")
	// Order within a tenant is kept up to the intake's concurrency: the
	// workers that take submissions at once queue them in any order.
	const window = 2 * 16
	started := p.started()
	aBefore, seen := 0, map[byte]int{}
	for _, id := range started {
		var n int
		_, err := fmt.Sscanf(id[2:], "%d", &n)
		require.NoError(t, err)
		k := seen[id[0]]
		seen[id[0]]++
		require.InDelta(t, k, n, window, "job %s started %d-th of its tenant's: in the order they came", id, k)
		if id[0] == 'a' && seen['b'] < len(bs) {
			aBefore++
		}
	}
	t.Logf("%d of A's 5000 jobs started before B's 20 had all started, %d of them once B's waited", aBefore, aBefore-aWhenBWaited)
	// Weighted fair queueing alternates the tenants once B waits: about
	// one A start for each of B's, and the admissions under way (the
	// route's 16 submit workers).
	require.Less(t, aBefore-aWhenBWaited, 60, "B's jobs all start before 60 more of A's once they wait")
	s.nothingRepaired()
}

// submitAs publishes n submissions of tenant, with ids from the format
// id (of their number), and returns the ids.
func (s *rig) submitAs(tenant, id string, n int) []string {
	s.t.Helper()
	ids := make([]string, n)
	natstest.PublishMany(s.t, s.JS, n, func(i int) (string, []byte) {
		ids[i] = fmt.Sprintf(id, i)
		b, err := json.Marshal(events.Submit{V: events.Version, ID: ids[i], Model: "m", Input: json.RawMessage(`{}`), Metadata: map[string]string{"tenant": tenant}})
		require.NoError(s.t, err)
		return s.NS.Submit("fake"), b
	})
	return ids
}

// hiddenCap is a provider that runs at most cap jobs at once and refuses a
// create past that with a 429 naming no Retry-After, as a concurrency cap
// does; jobs end 200 ms after they start.
type hiddenCap struct {
	*fake
	mu                              sync.Mutex
	cap, running, refused, accepted int
	created                         chan string
}

func (h *hiddenCap) Submit(ctx context.Context, req provider.SubmitRequest) (provider.Status, error) {
	h.mu.Lock()
	if h.running >= h.cap {
		h.refused++
		h.mu.Unlock()
		return provider.Status{}, &provider.Error{Class: provider.RateLimited, HTTPStatus: 429, Concurrency: true, Message: "concurrency limit reached"}
	}
	h.running++
	h.accepted++
	h.mu.Unlock()
	st, err := h.fake.Submit(ctx, req)
	h.created <- req.JobID
	return st, err
}

// With nothing configured but learn_running, the route learns the
// provider's hidden cap of 4 from its refusals, and every job is created
// once.
func TestRunningCapLearnedFromRefusals(t *testing.T) {
	t.Parallel()
	h := &hiddenCap{fake: newFake(), cap: 4, created: make(chan string, 100)}
	var paused atomic.Int64
	s := start(t, h, config.Route{Budgets: config.Budgets{LearnRunning: true}, Workers: config.Workers{Submit: 8}}, func(env *stack.Stack) {
		env.Pauses.Started = func(string, string, time.Duration) { paused.Add(1) }
	})
	endAfter(t, s, h.created, 200*time.Millisecond, func(string) {
		h.mu.Lock()
		h.running--
		h.mu.Unlock()
	})
	const n = 40
	for i := range n {
		s.submit(fmt.Sprintf("l-%02d", i))
	}
	require.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.accepted == n
	}, 60*time.Second, 20*time.Millisecond, "every job is created")
	st, err := s.JS.Stream(s.Ctx(), s.NS.RunningStream(events.LevelRoute, "fake"))
	require.NoError(t, err)
	// The cap only comes down on evidence: never below the provider's, and
	// down from uncapped; how far it came depends on how often the
	// jobs met the provider's cap (4 in most runs, 10 seen under load).
	learned := st.CachedInfo().Config.MaxMsgs
	require.GreaterOrEqual(t, learned, int64(4), "never below the provider's cap")
	require.Less(t, learned, int64(budget.Uncapped), "learned from the refusals")
	h.mu.Lock()
	defer h.mu.Unlock()
	t.Logf("%d creates refused while the cap was learned", h.refused)
	require.Positive(t, h.refused)
	// Each refusal lowers the cap by at least one until it is the
	// provider's, and a job refused keeps its slot for its retry: how many
	// it costs depends on the timing (6 to 17 seen), never a refusal per job.
	require.Less(t, h.refused, n/2, "learning costs fewer refusals than half the jobs")
	require.Zero(t, paused.Load(), "a job refused for the running cap waits for a slot; the route is not paused")
	for i := range n {
		require.Equal(t, 1, h.createsOf(fmt.Sprintf("l-%02d", i)), "one accepted create per job")
	}
	s.nothingRepaired()
}

// endAfter ends each job created (its id on created) d after it started,
// as the poller would see it end: first at the provider (atProvider, when
// set), then in its record, which frees its running slots.
func endAfter(t *testing.T, s *rig, created <-chan string, d time.Duration, atProvider func(id string)) {
	stop := make(chan struct{})
	var enders sync.WaitGroup
	enders.Go(func() {
		for {
			select {
			case <-stop:
				return
			case id := <-created:
				enders.Go(func() {
					select {
					case <-stop:
						return
					case <-time.After(d):
					}
					if atProvider != nil {
						atProvider(id)
					}
					if rec, err := s.Jobs.Intake().Read(s.Ctx(), id); err == nil {
						_, _ = s.Jobs.Intake().End(s.Ctx(), rec, state.Observation{State: state.Succeeded, Raw: "succeeded", Source: state.FromPoll, At: time.Now()}, jobs.Always)
					}
				})
			}
		}
	})
	t.Cleanup(func() { close(stop); enders.Wait() })
}

// Tenant weights share the slots: with gold weighted 3 and std 1 (the
// default), both waiting behind a full route of one running slot, gold's
// jobs start three for each of std's. The slot frees only when a job
// ends, so the queue admits one job at a time, least weighted service
// first: the order is the weighting's, however loaded the machine.
func TestTenantWeightsShareTheSlots(t *testing.T) {
	t.Parallel()
	p := &turnover{fake: newFake(), created: make(chan string, 100)}
	s := start(t, p, config.Route{Budgets: config.Budgets{Running: 1}, TenantKey: "tenant", TenantWeights: map[string]float64{"gold": 3}}, nil)
	// A job holds the slot while both tenants' jobs queue up.
	hold := s.submitAs("other", "hold-%d", 1)[0]
	select {
	case id := <-p.created:
		require.Equal(t, hold, id)
	case <-time.After(20 * time.Second):
		t.Fatal("the first job is not created")
	}
	const each = 30
	s.submitAs("gold", "gold-%02d", each)
	s.submitAs("std", "std-%02d", each)
	require.Eventually(t, func() bool {
		st, err := s.JS.Stream(s.Ctx(), s.NS.WaitingStream())
		return err == nil && st.CachedInfo().State.Msgs == 2*each
	}, 20*time.Second, 10*time.Millisecond, "every job waits for the slot")

	endAfter(t, s, p.created, 0, nil)
	rec, err := s.Jobs.Intake().Read(s.Ctx(), hold)
	require.NoError(t, err)
	_, err = s.Jobs.Intake().End(s.Ctx(), rec, state.Observation{State: state.Succeeded, Raw: "succeeded", Source: state.FromPoll, At: time.Now()}, jobs.Always)
	require.NoError(t, err)

	// The first 24 starts, while both tenants still wait (gold's 30 last
	// 40 starts): 18 of gold's at 3:1, 12 without the weights.
	const look = 24
	require.Eventually(t, func() bool { return len(p.started()) > look }, 30*time.Second, 10*time.Millisecond, "%d jobs start", look)
	gold := 0
	for _, id := range p.started()[1 : 1+look] {
		if strings.HasPrefix(id, "gold-") {
			gold++
		}
	}
	t.Logf("gold started %d of the first %d", gold, look)
	require.InDelta(t, look*3/4, gold, 3, "gold starts three jobs for std's one")
	s.nothingRepaired()
}

// countOf counts the ids of tenant (their first byte) in ids.
func countOf(ids []string, tenant byte) int {
	n := 0
	for _, id := range ids {
		if id[0] == tenant {
			n++
		}
	}
	return n
}
