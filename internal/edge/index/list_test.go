package index_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/index"
	"github.com/pollux-dev/pollux/pkg/state"
)

// fleet publishes 60 jobs: routes a, b, c in turn, models m1/m2, one
// second apart from t0, states cycling through queued, running,
// succeeded, failed; job i has idempotency key k<i> and remote id rem<i>.
func fleet(t *testing.T) (*env, *index.Index) {
	t.Helper()
	e := setup(t)
	for i := range 60 {
		j := job([]string{"a", "b", "c"}[i%3], fmt.Sprintf("j%02d", i), t0.Add(time.Duration(i)*time.Second), state.Queued)
		j.Model = []string{"m1", "m2"}[i%2]
		j.IdempotencyKey, j.RemoteID = fmt.Sprintf("k%d", i), fmt.Sprintf("rem%d", i)
		e.publish(j, 1)
		if st := []state.State{state.Queued, state.Running, state.Succeeded, state.Failed}[i%4]; st != state.Queued {
			j.State = st
			e.publish(j, 2)
		}
	}
	return e, e.start(index.Config{})
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	_, x := fleet(t)
	for _, tc := range []struct {
		name string
		q    index.Query
		want []string
	}{
		{"route", index.Query{Route: "a", Limit: 5}, []string{"j57", "j54", "j51", "j48", "j45"}},
		{"state", index.Query{States: []state.State{state.Failed}, Limit: 3}, []string{"j59", "j55", "j51"}},
		{"route and states", index.Query{Route: "b", States: []state.State{state.Running, state.Succeeded}, Limit: 4}, []string{"j58", "j49", "j46", "j37"}},
		{"model", index.Query{Model: "m2", Limit: 3}, []string{"j59", "j57", "j55"}},
		{"created range", index.Query{CreatedAfter: t0.Add(10 * time.Second), CreatedBefore: t0.Add(14 * time.Second)}, []string{"j13", "j12", "j11"}},
		{"route, model, range", index.Query{Route: "c", Model: "m1", CreatedBefore: t0.Add(20 * time.Second)}, []string{"j14", "j08", "j02"}},
		{"search by id", index.Query{Search: "j07"}, []string{"j07"}},
		{"search by key", index.Query{Search: "k7"}, []string{"j07"}},
		{"search by remote id", index.Query{Search: "rem7"}, []string{"j07"}},
		{"search and a filter that excludes", index.Query{Search: "j07", Route: "a"}, nil},
		{"search for nothing", index.Query{Search: "nope"}, nil},
		{"search is exact: a prefix finds nothing", index.Query{Search: "j0"}, nil},
		{"unknown route", index.Query{Route: "z"}, nil},
		{"unknown model", index.Query{Model: "z"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, err := x.List(tc.q)
			require.NoError(t, err)
			require.Equal(t, tc.want, ids(page))
		})
	}
}

// Total counts every match, not the page's; it comes from the running
// counts for route and states, from a scan otherwise.
func TestListTotals(t *testing.T) {
	t.Parallel()
	_, x := fleet(t)
	for _, tc := range []struct {
		q    index.Query
		want int
	}{
		{index.Query{}, 60},
		{index.Query{Route: "a"}, 20},
		{index.Query{States: []state.State{state.Failed, state.Failed}}, 15},
		{index.Query{Route: "a", States: []state.State{state.Queued, state.Succeeded}}, 10},
		{index.Query{Model: "m1"}, 30},
		{index.Query{Model: "m2", States: []state.State{state.Running, state.Failed}}, 30},
		{index.Query{Route: "b", Model: "m2", States: []state.State{state.Running}}, 5},
		{index.Query{CreatedAfter: t0.Add(49 * time.Second)}, 10},
		{index.Query{Search: "k3"}, 1},
		{index.Query{Route: "zzz"}, 0},
	} {
		q := tc.q
		q.Limit = 2
		page, err := x.List(q)
		require.NoError(t, err)
		require.Equal(t, tc.want, page.Total, "%+v", tc.q)
		require.False(t, page.TotalCapped)
		if tc.want > 2 {
			require.NotEmpty(t, page.Next)
			next, err := x.List(index.Query{Route: q.Route, States: q.States, Model: q.Model, CreatedAfter: q.CreatedAfter, Search: q.Search, Cursor: page.Next, Limit: 2})
			require.NoError(t, err)
			require.Equal(t, tc.want, next.Total, "the total does not depend on the page")
		}
	}
}

// Limit defaults to 50 and is at most 500; a negative one is refused.
func TestListLimits(t *testing.T) {
	t.Parallel()
	_, x := fleet(t)
	page, err := x.List(index.Query{})
	require.NoError(t, err)
	require.Len(t, page.Jobs, index.DefaultLimit)
	page, err = x.List(index.Query{Limit: 10_000})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 60)
	require.Empty(t, page.Next)
	_, err = x.List(index.Query{Limit: -1})
	require.ErrorContains(t, err, "limit")
}

func TestBadCursor(t *testing.T) {
	t.Parallel()
	_, x := fleet(t)
	for _, c := range []string{"!!", "bm90aGluZw", "eC55", "MTIzLg"} { // not base64, "nothing", "x.y", "123."
		_, err := x.List(index.Query{Cursor: c})
		require.ErrorIs(t, err, index.ErrBadCursor, c)
		require.ErrorContains(t, err, "cursor")
	}
}

// Pages walked with Next see every job that existed when the walk began
// exactly once, newest first, while new jobs keep coming.
func TestCursorPagingIsStableUnderConcurrentInserts(t *testing.T) {
	t.Parallel()
	e, x := fleet(t)
	before, err := x.List(index.Query{Limit: index.MaxLimit})
	require.NoError(t, err)

	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 100 {
			// Newer jobs, and jobs created in the middle of the list (a
			// replayed or late event).
			e.publish(job("a", fmt.Sprintf("new%03d", i), t0.Add(time.Hour+time.Duration(i)*time.Second), state.Queued), 1)
			e.publish(job("b", fmt.Sprintf("mid%03d", i), t0.Add(30*time.Second+time.Duration(i)), state.Queued), 1)
		}
	})
	var seen []index.Entry
	cursor := ""
	for {
		page, err := x.List(index.Query{Cursor: cursor, Limit: 7})
		require.NoError(t, err)
		seen = append(seen, page.Jobs...)
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	wg.Wait()

	got := map[string]int{}
	for i, s := range seen {
		got[s.ID]++
		if i > 0 {
			prev := seen[i-1]
			require.True(t, prev.CreatedAt.After(s.CreatedAt) || prev.CreatedAt.Equal(s.CreatedAt) && prev.ID > s.ID, "newest first: %s then %s", prev.ID, s.ID)
		}
	}
	for _, j := range before.Jobs {
		require.Equal(t, 1, got[j.ID], "job %s is seen once", j.ID)
	}
	for id, n := range got {
		require.Equal(t, 1, n, "job %s is seen once", id)
	}
}

// Jobs created at the same time are ordered by id, greatest first, and a
// cursor between them is exact.
func TestListOrdersTiesByID(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, id := range []string{"b", "d", "a", "c"} {
		e.publish(job("r", id, t0, state.Queued), 1)
	}
	x := e.start(index.Config{})
	page, err := x.List(index.Query{Limit: 3})
	require.NoError(t, err)
	require.Equal(t, []string{"d", "c", "b"}, ids(page))
	page, err = x.List(index.Query{Limit: 3, Cursor: page.Next})
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, ids(page))
	require.Empty(t, page.Next)
}

// Search finds every job that shares a key (two routes, one idempotency
// key) and follows changes of remote id.
func TestSearchFollowsChanges(t *testing.T) {
	t.Parallel()
	e := setup(t)
	x := e.start(index.Config{})
	j1 := job("r1", "j1", t0, state.Pending)
	j1.IdempotencyKey = "shared"
	j2 := job("r2", "j2", t0.Add(time.Second), state.Queued)
	j2.IdempotencyKey = "shared"
	e.publish(j1, 1)
	e.publish(j2, 1)
	j1.RemoteID, j1.State = "rem-1", state.Queued
	e.publish(j1, 2)
	e.caughtUp(x)
	page, err := x.List(index.Query{Search: "shared"})
	require.NoError(t, err)
	require.Equal(t, []string{"j2", "j1"}, ids(page))
	page, err = x.List(index.Query{Search: "rem-1"})
	require.NoError(t, err)
	require.Equal(t, []string{"j1"}, ids(page))

	j1.RemoteID = "rem-2" // resubmitted
	e.publish(j1, 3)
	e.caughtUp(x)
	page, err = x.List(index.Query{Search: "rem-1"})
	require.NoError(t, err)
	require.Empty(t, page.Jobs)
	page, err = x.List(index.Query{Search: "rem-2", States: []state.State{state.Queued}})
	require.NoError(t, err)
	require.Equal(t, []string{"j1"}, ids(page))
	require.True(t, slices.Equal([]string{"j1"}, ids(page)))
}

// The state counts of a query are what each state would list with the
// query's other filters: its route, model, time range and search.
func TestStateCountsFollowTheOtherFilters(t *testing.T) {
	t.Parallel()
	_, x := fleet(t)
	for _, q := range []index.Query{
		{},
		{Route: "a"},
		{Model: "m1"},
		{Route: "b", Model: "m2"},
		{CreatedAfter: t0.Add(10 * time.Second), CreatedBefore: t0.Add(30 * time.Second)},
		{Route: "c", Model: "m1", CreatedBefore: t0.Add(40 * time.Second)},
		{Search: "k7"},
		{Search: "j07", Route: "a"},
		{Route: "a", States: []state.State{state.Failed}, Limit: 1}, // its own states and limit aside
	} {
		counts, capped := x.StateCounts(q)
		require.False(t, capped)
		for _, st := range state.States {
			one := q
			one.States, one.Limit = []state.State{st}, 0
			page, err := x.List(one)
			require.NoError(t, err)
			require.Equal(t, page.Total, counts[st], "%+v in %s", q, st)
		}
	}
	counts, _ := x.StateCounts(index.Query{Route: "a", Model: "m1"})
	require.Equal(t, map[state.State]int{state.Queued: 5, state.Succeeded: 5}, counts, "route a's m1 jobs: i = 0, 6, 12, ... (mod 4: 0 or 2)")
}
