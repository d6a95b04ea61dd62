package budget_test

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
)

var refusal = &provider.Error{Class: provider.RateLimited, HTTPStatus: 429, Message: "Too Many Requests"}

// leaseCount is how many lease messages a budget of account "a" has.
func leaseCount(t *testing.T, res *events.Resources, kind string) int {
	t.Helper()
	info, err := res.Slots.Info(context.Background(), jetstream.WithSubjectFilter(events.Default.Slots(events.Scope(events.LevelAccount, "a"), kind)))
	require.NoError(t, err)
	return len(info.State.Subjects)
}

func learning(t *testing.T, js jetstream.JetStream, res *events.Resources, l budget.Limit) (budget.Chain, *budget.Pool) {
	t.Helper()
	p := budget.NewPool(js, events.Default, res.Slots, events.Options{})
	t.Cleanup(p.Close)
	c, err := p.Calls(context.Background(), []budget.Level{{Level: events.LevelAccount, Name: "a", Submit: l}}, events.SlotSubmit)
	require.NoError(t, err)
	require.Len(t, c, 1)
	return c, p
}

// With nothing configured, a level that learns its rate costs nothing
// until the provider refuses a call; then the whole fleet calls at
// Decrease of the rate it was calling at, a second refusal right after
// does not lower it again, and a refusal the provider says is about jobs
// running at once, or one naming a Retry-After, teaches the rate nothing.
func TestCallRateIsLearnedFromRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, res := setup(t)
	c1, _ := learning(t, js, res, budget.Limit{Learn: true})
	c2, _ := learning(t, js, res, budget.Limit{Learn: true}) // another process
	_, open := c1[0].Learned()
	require.True(t, open, "nothing to limit yet")
	require.Zero(t, leaseCount(t, res, events.SlotSubmit), "no leases while open")

	for range 10 {
		ls, err := c1.Acquire(ctx)
		require.NoError(t, err)
		ls.Answered(nil)
	}
	ls, err := c1.Acquire(ctx)
	require.NoError(t, err)
	ls.Answered(&provider.Error{Class: provider.RateLimited, HTTPStatus: 429, Concurrency: true})
	ls, err = c1.Acquire(ctx)
	require.NoError(t, err)
	ls.Answered(&provider.Error{Class: provider.RateLimited, HTTPStatus: 429, RetryAfter: time.Second})
	_, open = c1[0].Learned()
	require.True(t, open, "a concurrency refusal and a Retry-After teach the rate nothing")

	ls, err = c1.Acquire(ctx)
	require.NoError(t, err)
	ls.Answered(refusal)
	rate, open := c1[0].Learned()
	require.False(t, open)
	// 13 calls within the first second: 13 a second, 0.7 of that.
	require.InDelta(t, 13*budget.Decrease, rate.Rate, 0.01)
	require.InDelta(t, 13.0, rate.Ceiling, 0.01)
	require.Equal(t, 1, rate.Lowered)
	require.Equal(t, int(math.Ceil(rate.Rate)), leaseCount(t, res, events.SlotSubmit), "a second's worth of leases")

	require.Eventually(t, func() bool {
		r, open := c2[0].Learned()
		return !open && r == rate
	}, 5*time.Second, 10*time.Millisecond, "the other process obeys it")

	ls, err = c2.Acquire(ctx)
	require.NoError(t, err)
	ls.Answered(refusal)
	again, _ := c1[0].Learned()
	require.Equal(t, rate, again, "refusals of calls made under the old rate do not lower it again")

	kv, err := js.KeyValue(ctx, events.Default.LimitsBucket())
	require.NoError(t, err)
	e, err := kv.Get(ctx, events.LimitsKey(events.Scope(events.LevelAccount, "a"), events.SlotSubmit))
	require.NoError(t, err)
	var stored budget.LearnedRate
	require.NoError(t, json.Unmarshal(e.Value(), &stored))
	require.Equal(t, rate.Rate, stored.Rate, "shared in the limits bucket")
}

// A learned rate rises by IncreaseStep once it has held for IncreaseEvery
// while calls waited for it, and never above a configured rate: reaching
// it, the configured rate is in force again.
func TestLearnedRateRisesWhileCallsWaitUpToTheConfiguredRate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, res := setup(t)
	c, _ := learning(t, js, res, budget.Limit{Rate: 2, Learn: true})
	_, open := c[0].Learned()
	require.False(t, open, "the configured rate is in force")
	require.Equal(t, 2, leaseCount(t, res, events.SlotSubmit))

	kv, err := js.KeyValue(ctx, events.Default.LimitsBucket())
	require.NoError(t, err)
	key := events.LimitsKey(events.Scope(events.LevelAccount, "a"), events.SlotSubmit)
	old, err := json.Marshal(budget.LearnedRate{Rate: 1.5, Ceiling: 1.8, At: time.Now().Add(-budget.IncreaseEvery - time.Second)})
	require.NoError(t, err)
	_, err = kv.Put(ctx, key, old) // learned long ago
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		r, _ := c[0].Learned()
		return r.Rate == 1.5
	}, 5*time.Second, 10*time.Millisecond)

	// Calls that find no lease free: the rate holds them back.
	for range 2 {
		ls, err := c.Acquire(ctx)
		require.NoError(t, err)
		ls.Answered(nil)
	}
	r, _ := c[0].Learned()
	require.Equal(t, 1.5, r.Rate, "no call waited yet")
	ls, err := c.Acquire(ctx) // waits out a lease's rest
	require.NoError(t, err)
	ls.Answered(nil)
	r, _ = c[0].Learned()
	require.InDelta(t, 1.5+budget.IncreaseStep*1.8, r.Rate, 1e-9, "a step of the ceiling")

	// At its ceiling without a refusal: the ceiling was too low, probed.
	rise := func(from budget.LearnedRate) budget.LearnedRate {
		t.Helper()
		from.At = time.Now().Add(-budget.IncreaseEvery - time.Second)
		b, err := json.Marshal(from)
		require.NoError(t, err)
		_, err = kv.Put(ctx, key, b)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			r, _ := c[0].Learned()
			return r.Rate == from.Rate
		}, 5*time.Second, 10*time.Millisecond)
		// A process tries a raise at most once a second: calls go on
		// until one of them raises it.
		var r budget.LearnedRate
		require.Eventually(t, func() bool {
			ls, err := c.Acquire(ctx)
			if err != nil {
				return false
			}
			ls.Answered(nil)
			r, _ = c[0].Learned()
			return r.Rate != from.Rate
		}, 10*time.Second, 50*time.Millisecond, "raised")
		return r
	}
	require.InDelta(t, 1.2*budget.Probe, rise(budget.LearnedRate{Rate: 1.2, Ceiling: 1}).Rate, 1e-9)

	// Climbing back to a ceiling above the configured rate, reaching the
	// configured one: it is in force again.
	rise(budget.LearnedRate{Rate: 1.95, Ceiling: 2.5})
	require.Eventually(t, func() bool {
		r, _ := c[0].Learned()
		return r.Rate == 0
	}, 5*time.Second, 10*time.Millisecond, "back to the configured rate")
	_, err = kv.Get(ctx, key)
	require.ErrorIs(t, err, jetstream.ErrKeyNotFound)
}
