package route_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/provider"
)

// fleet returns n Pauses mirrors of one bucket, as n processes would have.
func fleet(t *testing.T, n int) []*route.Pauses {
	t.Helper()
	_, _, js := natstest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "routes"})
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	out := make([]*route.Pauses, n)
	for i := range out {
		p := route.NewPauses(kv, zerolog.Nop())
		ready := make(chan struct{})
		wg.Go(func() { require.NoError(t, p.Run(ctx, ready)) })
		<-ready
		out[i] = p
	}
	return out
}

func TestRateLimitPausesTheWholeFleet(t *testing.T) {
	t.Parallel()
	ps := fleet(t, 3)
	ctx := context.Background()

	got, err := ps[0].RateLimited(ctx, "r", 2*time.Second, "throttled")
	require.NoError(t, err)
	require.Equal(t, route.PauseRateLimit, got.Kind)
	_, ok := ps[0].Active("r")
	require.True(t, ok, "the process that saw the 429 pauses at once")
	for _, p := range ps[1:] {
		require.Eventually(t, func() bool { _, ok := p.Active("r"); return ok }, 5*time.Second, 5*time.Millisecond,
			"every other process hears of it")
		left := p.Remaining("r")
		require.Greater(t, left, time.Second)
		require.Less(t, left, 2*time.Second+300*time.Millisecond, "with at most 10% (≥100 ms) jitter")
	}
	_, ok = ps[0].Active("other")
	require.False(t, ok, "other routes run on")

	// A shorter pause never shortens a longer one.
	shorter, err := ps[1].RateLimited(ctx, "r", 100*time.Millisecond, "again")
	require.NoError(t, err)
	require.True(t, got.Until.Equal(shorter.Until))
}

func TestConcurrentPausesKeepTheLatestEnd(t *testing.T) {
	t.Parallel()
	ps := fleet(t, 4)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			_, err := p.RateLimited(ctx, "r", time.Duration(i+1)*time.Second, "throttled")
			require.NoError(t, err)
		})
	}
	wg.Wait()
	for _, p := range ps {
		require.Eventually(t, func() bool {
			ps, ok := p.Active("r")
			return ok && time.Until(ps.Until) > 3*time.Second
		}, 5*time.Second, 5*time.Millisecond)
	}
}

// A storm of rate limits across the fleet — four processes, each of
// whose calls the provider refuses with the same Retry-After — records the
// pause without the writers running out of tries, and every process holds
// its calls for it. Red when every refusal writes a pause a few
// milliseconds longer than the last: the writers contend for the key and
// fail ("too many concurrent writers").
func TestARateLimitStormPausesEveryProcess(t *testing.T) {
	t.Parallel()
	ps := fleet(t, 4)
	ctx := context.Background()
	var wg sync.WaitGroup
	var failed atomic.Int32
	for _, p := range ps {
		for range 25 {
			wg.Go(func() {
				if _, err := p.RateLimited(ctx, "r", time.Minute, "slow down"); err != nil {
					failed.Add(1)
					t.Log(err)
				}
			})
		}
	}
	wg.Wait()
	require.Zero(t, failed.Load(), "every refusal's pause recorded")
	for _, p := range ps {
		require.Eventually(t, func() bool {
			ps, ok := p.Active("r")
			return ok && time.Until(ps.Until) > 50*time.Second
		}, 5*time.Second, 5*time.Millisecond, "every process holds its calls")
	}
}

func TestAuthFailuresBackOffAndRecover(t *testing.T) {
	t.Parallel()
	ps := fleet(t, 2)
	ctx := context.Background()
	first, err := ps[0].AuthFailed(ctx, "r", "bad token")
	require.NoError(t, err)
	require.Equal(t, 1, first.Strikes)
	require.InDelta(t, route.AuthPauseBase.Seconds(), time.Until(first.Until).Seconds(), 1)

	again, err := ps[1].AuthFailed(ctx, "r", "bad token")
	require.NoError(t, err)
	require.True(t, first.Until.Equal(again.Until), "one strike per episode while paused")
	require.Equal(t, 1, again.Strikes)

	require.NoError(t, ps[0].Recovered(ctx, "r"))
	require.Eventually(t, func() bool { _, ok := ps[1].Active("r"); return !ok }, 5*time.Second, 5*time.Millisecond,
		"a success clears the pause everywhere")
}

// A rate limit pauses the route's account: every route of it waits, and
// a route of no account keeps calling. Rate limits without Retry-After in
// a row double the pause; a success after the pause resets it.
func TestRateLimitsPauseTheAccountAndEscalate(t *testing.T) {
	t.Parallel()
	p := fleet(t, 1)[0]
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Now()
	p.SetNow(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	a := &route.Route{Name: "a", Account: "acct"}
	b := &route.Route{Name: "b", Account: "acct"}
	solo := &route.Route{Name: "solo"}
	throttled := &provider.Error{Class: provider.RateLimited, HTTPStatus: 429, Message: "concurrency limit"}

	var pauses []time.Duration
	for range 4 {
		require.Positive(t, p.After(ctx, a, "submit", throttled))
		ps, ok := p.Active(a.PauseKey())
		require.True(t, ok)
		pauses = append(pauses, ps.Until.Sub(now))
		require.Positive(t, p.Hold(b), "route b spends the same account")
		require.Zero(t, p.Hold(solo))
		// A call under way when the pause began adds no strike.
		p.After(ctx, b, "status", throttled)
		advance(ps.Until.Sub(now) + time.Millisecond)
	}
	base := route.DefaultRateLimitPause
	require.Equal(t, []time.Duration{base, 2 * base, 4 * base, 8 * base}, pauses, "each rate limit in a row doubles the pause")

	require.Zero(t, p.After(ctx, b, "status", nil), "a success after the pause")
	p.After(ctx, a, "submit", throttled)
	ps, _ := p.Active(a.PauseKey())
	require.Equal(t, base, ps.Until.Sub(now), "the success reset the strikes")

	// Retry-After is obeyed — never less, rounded up by less than its
	// fiftieth — and adds no strike.
	advance(time.Minute)
	withHint := &provider.Error{Class: provider.RateLimited, HTTPStatus: 429, RetryAfter: 42 * time.Second}
	p.After(ctx, a, "submit", withHint)
	ps, _ = p.Active(a.PauseKey())
	require.GreaterOrEqual(t, ps.Until.Sub(now), 42*time.Second)
	require.Less(t, ps.Until.Sub(now), 42*time.Second+42*time.Second/50)
	require.Equal(t, 1, ps.RateStrikes)
}

// An account's pause reaches every process, and the census's keys in the
// same bucket are no pause.
func TestAnAccountPauseReachesTheFleet(t *testing.T) {
	t.Parallel()
	ps := fleet(t, 2)
	ctx := context.Background()
	a := &route.Route{Name: "a", Account: "acct"}
	b := &route.Route{Name: "b", Account: "acct"}
	require.Positive(t, ps[0].After(ctx, a, "submit", &provider.Error{Class: provider.RateLimited, HTTPStatus: 429, RetryAfter: time.Minute}))
	require.Eventually(t, func() bool { return ps[1].Hold(b) > 30*time.Second }, 5*time.Second, 5*time.Millisecond,
		"route b, of the same account, waits in the other process")
}

// A pause the provider sized ends no earlier than it asked, and less than
// a fiftieth (at most a second, at least 10 ms) later.
func TestRoundUpNeverShortensAPause(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 10, 0, 0, 123456789, time.UTC)
	for _, d := range []time.Duration{time.Millisecond, 20 * time.Millisecond, 999 * time.Millisecond, 2 * time.Second, 42 * time.Second, 10 * time.Minute} {
		want := now.Add(d)
		got := route.RoundUp(want, now)
		require.False(t, got.Before(want), d)
		require.Less(t, got.Sub(want), min(max(d/50, 10*time.Millisecond), time.Second), d)
	}
}
