package budget_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

func levels(account string, accountLimit, routeLimit budget.Limit, route string, global budget.Limit) []budget.Level {
	return []budget.Level{
		{Level: events.LevelGlobal, Status: global},
		{Level: events.LevelAccount, Name: account, Status: accountLimit},
		{Level: events.LevelRoute, Name: route, Status: routeLimit},
	}
}

// Two routes of one account, in two processes, share the account's
// leases: together they never hold more than the account allows.
func TestAccountBudgetIsSharedByItsRoutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, res := setup(t)
	p1 := budget.NewPool(js, events.Default, res.Slots, events.Options{})
	p2 := budget.NewPool(js, events.Default, res.Slots, events.Options{})
	defer p1.Close()
	defer p2.Close()
	acct := budget.Limit{Concurrency: 2}
	c1, err := p1.Calls(ctx, levels("a", acct, budget.Limit{Concurrency: 5}, "r1", budget.Limit{}), events.SlotStatus)
	require.NoError(t, err)
	require.Len(t, c1, 2, "route and account; the global level limits nothing and costs nothing")
	c2, err := p2.Calls(ctx, levels("a", acct, budget.Limit{}, "r2", budget.Limit{}), events.SlotStatus)
	require.NoError(t, err)
	require.Len(t, c2, 1)

	l1, err := c1.Acquire(ctx)
	require.NoError(t, err)
	l2, err := c2.Acquire(ctx)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = c2.Acquire(short)
	require.Error(t, err, "the account's two leases are out")
	l1.Release()
	l3, err := c2.Acquire(ctx)
	require.NoError(t, err, "route r1's lease came back to the account")
	l2.Release()
	l3.Release()
}

// A global budget holds across two accounts.
func TestGlobalBudgetHoldsAcrossAccounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, res := setup(t)
	global := budget.Limit{Concurrency: 1}
	pa := budget.NewPool(js, events.Default, res.Slots, events.Options{})
	pb := budget.NewPool(js, events.Default, res.Slots, events.Options{})
	defer pa.Close()
	defer pb.Close()
	ca, err := pa.Calls(ctx, levels("a", budget.Limit{Concurrency: 3}, budget.Limit{}, "ra", global), events.SlotStatus)
	require.NoError(t, err)
	cb, err := pb.Calls(ctx, levels("b", budget.Limit{Concurrency: 3}, budget.Limit{}, "rb", global), events.SlotStatus)
	require.NoError(t, err)
	la, err := ca.Acquire(ctx)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = cb.Acquire(short)
	require.Error(t, err, "account b has leases, the global level has none")
	la.Release()
	lb, err := cb.Acquire(ctx)
	require.NoError(t, err)
	lb.Release()
}

// A chain takes a lease at every level or none: the route's lease goes
// back when the account has none free.
func TestChainTakesAllOrNone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, res := setup(t)
	p := budget.NewPool(js, events.Default, res.Slots, events.Options{})
	defer p.Close()
	ls := levels("a", budget.Limit{Concurrency: 1}, budget.Limit{Concurrency: 1}, "r", budget.Limit{})
	chain, err := p.Calls(ctx, ls, events.SlotStatus)
	require.NoError(t, err)
	// Another route of the account holds the account's lease.
	other, err := p.Calls(ctx, levels("a", budget.Limit{Concurrency: 1}, budget.Limit{}, "r2", budget.Limit{}), events.SlotStatus)
	require.NoError(t, err)
	held, err := other.Acquire(ctx)
	require.NoError(t, err)
	_, err = chain.Acquire(ctx)
	require.ErrorIs(t, err, budget.ErrBusy)
	require.ErrorContains(t, err, "account a")
	// The route's own lease was given back: with the account free, the
	// chain gets both at once.
	held.Release()
	routeOnly, err := p.Calls(ctx, ls[2:], events.SlotStatus)
	require.NoError(t, err)
	quick, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	l, err := routeOnly.Acquire(quick)
	require.NoError(t, err, "the route's lease is not held by the failed chain")
	l.Release()
}

func running(t *testing.T, level, name string, n int) (budget.Slots, *budget.Releaser) {
	t.Helper()
	js, _ := setup(t)
	p := budget.NewPool(js, events.Default, nil, events.Options{})
	s, err := p.Running(context.Background(), []budget.Level{{Level: level, Name: name, Running: n}})
	require.NoError(t, err)
	return s, budget.NewReleaser(js, events.Default)
}

// The server holds the cap: a take past it is refused, a job's second
// take gets the slot it holds, a released slot is taken again, and a
// release twice frees nothing more.
func TestRunningSlotsCapJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	slots, rel := running(t, events.LevelAccount, "a", 2)
	scope := events.Scope(events.LevelAccount, "a")
	taken := map[string][]state.Slot{}
	for _, job := range []string{"j1", "j2"} {
		held, full, err := slots.Take(ctx, job, nil)
		require.NoError(t, err)
		require.Nil(t, full)
		require.Len(t, held, 1)
		require.Equal(t, scope, held[0].Scope)
		require.NotZero(t, held[0].Seq)
		taken[job] = held
	}
	held, full, err := slots.Take(ctx, "j1", nil)
	require.NoError(t, err)
	require.Nil(t, full, "j1 holds its slot: taking it again is no second slot")
	require.Equal(t, taken["j1"], held, "the slot it holds, its sequence found")
	_, full, err = slots.Take(ctx, "j3", nil)
	require.NoError(t, err)
	require.NotNil(t, full, "two jobs run; the cap is two")
	require.Equal(t, "account a", full.Level().String())
	n, err := full.InUse(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)

	require.NoError(t, rel.Release(ctx, "j1", taken["j1"]))
	require.NoError(t, rel.Release(ctx, "j1", taken["j1"]), "a second release does nothing")
	_, full, err = slots.Take(ctx, "j3", nil)
	require.NoError(t, err)
	require.Nil(t, full, "j1's slot is free")
	_, full, err = slots.Take(ctx, "j4", nil)
	require.NoError(t, err)
	require.NotNil(t, full, "the second release freed nothing more")
}

// A take that finds one level full gives back what it took at the others.
func TestRunningTakeIsAllOrNone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, _ := setup(t)
	p := budget.NewPool(js, events.Default, nil, events.Options{})
	ls := []budget.Level{{Level: events.LevelAccount, Name: "a", Running: 1}, {Level: events.LevelRoute, Name: "r", Running: 5}}
	slots, err := p.Running(ctx, ls)
	require.NoError(t, err)
	_, full, err := slots.Take(ctx, "j1", nil)
	require.NoError(t, err)
	require.Nil(t, full)
	_, full, err = slots.Take(ctx, "j2", nil)
	require.NoError(t, err)
	require.Equal(t, "account a", full.Level().String())
	routeSlots, err := p.Running(ctx, ls[1:])
	require.NoError(t, err)
	n, err := routeSlots[0].InUse(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "j2's route slot went back when the account was full")
}

// Lowering a level's cap keeps the slots taken and refuses takes until
// enough jobs end; raising it admits at once.
func TestRunningCapChangesLive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, _ := setup(t)
	ensure := func(n int) budget.Slots {
		p := budget.NewPool(js, events.Default, nil, events.Options{})
		s, err := p.Running(ctx, []budget.Level{{Level: events.LevelRoute, Name: "r", Running: n}})
		require.NoError(t, err)
		return s
	}
	rel := budget.NewReleaser(js, events.Default)
	s := ensure(3)
	var a []state.Slot
	for _, j := range []string{"a", "b", "c"} {
		held, full, err := s.Take(ctx, j, nil)
		require.NoError(t, err)
		require.Nil(t, full)
		if j == "a" {
			a = held
		}
	}
	s = ensure(2)
	n, err := s[0].InUse(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n, "a lower cap takes no slot away")
	require.NoError(t, rel.Release(ctx, "a", []state.Slot{{Scope: "r"}}), "a slot without its sequence is freed by its subject")
	require.NoError(t, rel.Release(ctx, "a", a), "freed already")
	_, full, err := s.Take(ctx, "d", nil)
	require.NoError(t, err)
	require.NotNil(t, full, "two still run: the new cap is reached")
	s = ensure(4)
	_, full, err = s.Take(ctx, "d", nil)
	require.NoError(t, err)
	require.Nil(t, full, "a higher cap admits at once")
}

// Repair frees the slots no job holds, and only those.
func TestRunningRepairFreesSlotsNoJobHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	slots, _ := running(t, events.LevelAccount, "a", 10)
	scope := events.Scope(events.LevelAccount, "a")
	jobs := map[string]*state.Job{
		"running":   {ID: "running", State: state.Running, Slots: []state.Slot{{Scope: scope}}},
		"ended":     {ID: "ended", State: state.Succeeded, UpdatedAt: time.Now().Add(-budget.EndGrace)},
		"justended": {ID: "justended", State: state.Succeeded, UpdatedAt: time.Now()},
		"unnamed":   {ID: "unnamed", State: state.Pending},
		"otherslot": {ID: "otherslot", State: state.Running, Slots: []state.Slot{{Scope: "r"}}},
	}
	for _, id := range []string{"running", "ended", "justended", "unnamed", "otherslot", "missing"} {
		_, full, err := slots.Take(ctx, id, nil)
		require.NoError(t, err)
		require.Nil(t, full)
	}
	get := func(_ context.Context, id string) (*state.Job, error) {
		if j, ok := jobs[id]; ok {
			return j, nil
		}
		return nil, state.ErrNotFound
	}
	n, err := slots[0].Repair(ctx, get, time.Now(), 0)
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the ended job's slot goes at once: the others may be being taken, or freed by the end's writer")
	n, err = slots[0].Repair(ctx, get, time.Now().Add(budget.RepairGrace+time.Second), 0)
	require.NoError(t, err)
	require.Equal(t, 4, n, "past the grace: the just ended job's, the missing job's, and those no record names")
	inUse, err := slots[0].InUse(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, inUse, "the running job keeps its slot")

	failing := func(context.Context, string) (*state.Job, error) { return nil, errors.New("kv down") }
	_, err = slots[0].Repair(ctx, failing, time.Now().Add(time.Hour), 0)
	require.Error(t, err)
	inUse, err = slots[0].InUse(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, inUse, "a record that cannot be read frees nothing")
}

// A learning level lowers its cap to one below the jobs running when the
// provider refuses a create, keeps what it learned across restarts while
// the configuration stays, rises by one after ProbeEvery creates accepted
// at the cap, and never above the configured cap.
func TestRunningCapIsLearned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, _ := setup(t)
	level := budget.Level{Level: events.LevelAccount, Name: "a", Running: 6, Learn: true}
	ensure := func(l budget.Level) *budget.Running {
		p := budget.NewPool(js, events.Default, nil, events.Options{})
		s, err := p.Running(ctx, []budget.Level{l})
		require.NoError(t, err)
		return s[0]
	}
	capOf := func(r *budget.Running) int {
		st, err := js.Stream(ctx, events.Default.RunningStream(events.LevelAccount, "a"))
		require.NoError(t, err)
		return int(st.CachedInfo().Config.MaxMsgs)
	}
	r := ensure(level)
	for i := range 5 {
		_, full, err := budget.Slots{r}.Take(ctx, fmt.Sprintf("j%d", i), nil)
		require.NoError(t, err)
		require.Nil(t, full)
	}
	before := budget.Slots{r}.Before(ctx)
	require.Equal(t, []int{5}, before)
	// A job ends between the call and the refusal's count: the count read
	// before the call still bounds the provider's cap.
	require.NoError(t, budget.Slots{r}.Free(ctx, "j0", nil))
	limit, lowered, err := r.Refused(ctx, before[0])
	require.NoError(t, err)
	require.True(t, lowered)
	require.Equal(t, 4, limit, "refused at 5 running: the provider's cap is below 5, not below 4")
	require.Equal(t, 4, capOf(r))
	// The refused job keeps its slot and is refused again while the
	// slots taken are still above the new cap: nothing more to learn.
	limit, lowered, err = r.Refused(ctx, 5)
	require.NoError(t, err)
	require.False(t, lowered, "refused at 5 taken, the cap 4 already below")
	require.Equal(t, 4, limit)
	r = ensure(level)
	require.Equal(t, 4, capOf(r), "a restart keeps the learned cap")

	for range budget.ProbeEvery - 1 {
		_, raised, err := r.Accepted(ctx)
		require.NoError(t, err)
		require.False(t, raised)
	}
	limit, raised, err := r.Accepted(ctx)
	require.NoError(t, err)
	require.True(t, raised, "at its cap of 4 for a probe's creates: probe one more")
	require.Equal(t, 5, limit)
	_, full, err := budget.Slots{r}.Take(ctx, "j0", nil)
	require.NoError(t, err)
	require.Nil(t, full, "the raised cap admits one more")
	for range 2 * budget.ProbeEvery {
		_, _, err := r.Accepted(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, 6, capOf(r), "never above the configured cap")

	level.Running = 3
	ensure(level)
	require.Equal(t, 3, capOf(r), "a new configured cap replaces what was learned")
	unconfigured := ensure(budget.Level{Level: events.LevelAccount, Name: "b", Learn: true})
	st, err := js.Stream(ctx, events.Default.RunningStream(events.LevelAccount, "b"))
	require.NoError(t, err)
	require.EqualValues(t, budget.Uncapped, st.CachedInfo().Config.MaxMsgs, "nothing configured: it starts uncapped")
	_ = unconfigured
}
