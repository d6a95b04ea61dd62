package index

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// The sorted slices, maps and counts agree with a plain scan of the jobs
// the index holds, through random events, evictions and compactions.
func TestListAgreesWithAScan(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	_, _, js := natstest.JetStream(t) // Run is not called: events are applied directly
	x, err := New(Config{MaxJobs: 600}, js, events.Default, nil)
	require.NoError(t, err)
	seqs := map[string]uint64{}
	created := map[string]time.Time{}
	open := map[string]bool{} // jobs not ended: never forgotten
	states := []state.State{state.Pending, state.Queued, state.Running, state.Succeeded, state.Succeeded, state.Succeeded, state.Succeeded, state.Failed, state.Canceled}
	for step := range 6000 {
		id := fmt.Sprintf("j%d", rnd.IntN(1500))
		if _, ok := created[id]; !ok {
			// Mostly in creation order, sometimes late, often tied.
			created[id] = t0.Add(time.Duration(step-rnd.IntN(50)) * time.Second / 4).Truncate(time.Second)
		}
		seqs[id]++
		st := states[rnd.IntN(len(states))]
		route := fmt.Sprintf("r%d", rnd.IntN(3))
		j := &snapshot{Model: fmt.Sprintf("m%d", rnd.IntN(4)), State: st,
			CreatedAt: created[id], IdempotencyKey: fmt.Sprintf("k%d", rnd.IntN(300)), RemoteID: fmt.Sprintf("rem%d", rnd.IntN(2000))}
		seq := seqs[id]
		if rnd.IntN(10) == 0 && seq > 1 {
			seq-- // a redelivery
		}
		x.applyEvent(&event{V: 1, Type: string(st), Seq: seq, Route: route, JobID: id, State: st, Job: j, Time: t0}, uint64(step+1))
		if got, ok := x.Get(id); ok {
			open[id] = !terminal(got)
		} else {
			// Ended, and the oldest of the ended jobs: forgotten at once.
			require.True(t, st.Terminal(), "job %s in state %s is held", id, st)
			delete(open, id)
		}
		if step%500 == 499 {
			check(t, x, rnd, t0, open)
		}
	}
	n, _ := x.Size()
	require.Equal(t, 600, n, "ended jobs were forgotten down to MaxJobs")
	require.Greater(t, len(created), 1000, "jobs were forgotten, and their slots compacted")
}

// check compares the index with a scan of x.jobs.
func check(t *testing.T, x *Index, rnd *rand.Rand, t0 time.Time, open map[string]bool) {
	t.Helper()
	var held []Entry
	counts := map[string]map[state.State]int{"": {}, "r0": {}, "r1": {}, "r2": {}}
	for _, it := range x.jobs {
		held = append(held, it.e)
		counts[""][it.e.State]++
		counts[it.e.Route][it.e.State]++
	}
	for id, o := range open {
		if o {
			_, ok := x.jobs[id]
			require.True(t, ok, "open job %s is kept", id)
		}
	}
	for r, c := range counts {
		require.Equal(t, c, x.Counts(r), "route %q", r)
	}
	require.Equal(t, len(held), x.all().live)
	slices.SortFunc(held, func(a, b Entry) int { return key{b.CreatedAt, b.ID}.compare(key{a.CreatedAt, a.ID}) })

	for range 30 {
		q := Query{Limit: 1 + rnd.IntN(40)}
		if rnd.IntN(2) == 0 {
			q.Route = fmt.Sprintf("r%d", rnd.IntN(3))
		}
		if rnd.IntN(2) == 0 {
			q.States = []state.State{state.Queued, state.Failed, state.Succeeded}[rnd.IntN(2):][:1+rnd.IntN(2)]
		}
		if rnd.IntN(3) == 0 {
			q.Model = fmt.Sprintf("m%d", rnd.IntN(4))
		}
		if rnd.IntN(3) == 0 {
			q.CreatedAfter = t0.Add(time.Duration(rnd.IntN(1500)) * time.Second / 4)
		}
		if rnd.IntN(3) == 0 {
			q.CreatedBefore = t0.Add(time.Duration(rnd.IntN(1500)) * time.Second / 4)
		}
		if rnd.IntN(4) == 0 {
			q.Search = []string{fmt.Sprintf("k%d", rnd.IntN(300)), fmt.Sprintf("rem%d", rnd.IntN(2000)), fmt.Sprintf("j%d", rnd.IntN(1500))}[rnd.IntN(3)]
		}
		var want []Entry
		m := newMatcher(q)
		for _, e := range held {
			if m.match(&e) && (q.Search == "" || e.ID == q.Search || e.IdempotencyKey == q.Search || e.RemoteID == q.Search) {
				want = append(want, e)
			}
		}
		var got []Entry
		for pages := 0; ; pages++ {
			p, err := x.List(q)
			require.NoError(t, err)
			require.Equal(t, len(want), p.Total, "%+v", q)
			got = append(got, p.Jobs...)
			if p.Next == "" {
				break
			}
			require.Len(t, p.Jobs, q.Limit)
			q.Cursor = p.Next
		}
		require.Equal(t, len(want), len(got), "%+v", q)
		for i := range want {
			require.Equal(t, want[i].ID, got[i].ID, "%+v", q)
		}
	}
}

// Without a running count for the query, Total is counted by a walk up to
// TotalCap, or by the indexes of a time range when nothing else filters.
func TestTotalIsCapped(t *testing.T) {
	t.Parallel()
	_, _, js := natstest.JetStream(t)
	x, err := New(Config{}, js, events.Default, nil)
	require.NoError(t, err)
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i := range TotalCap + 10 {
		x.applyEvent(&event{V: 1, Type: "queued", Seq: 1, Route: "r", JobID: fmt.Sprintf("j%05d", i), State: state.Queued, Time: t0.Add(time.Duration(i) * time.Millisecond),
			Job: &snapshot{Model: "m"}}, uint64(i+1))
	}
	p, err := x.List(Query{Model: "m", CreatedAfter: t0.Add(-time.Hour), Limit: 3})
	require.NoError(t, err)
	require.Equal(t, TotalCap, p.Total)
	require.True(t, p.TotalCapped)
	require.Equal(t, []string{"j10009", "j10008", "j10007"}, []string{p.Jobs[0].ID, p.Jobs[1].ID, p.Jobs[2].ID})
	p, err = x.List(Query{Route: "r", Limit: 3})
	require.NoError(t, err)
	require.Equal(t, TotalCap+10, p.Total, "a running count is exact")
	require.False(t, p.TotalCapped)
	p, err = x.List(Query{Route: "r", CreatedAfter: t0.Add(time.Second), Limit: 3})
	require.NoError(t, err)
	require.Equal(t, TotalCap+10-1001, p.Total, "a time range alone is counted by its indexes")
	require.False(t, p.TotalCapped)
}
