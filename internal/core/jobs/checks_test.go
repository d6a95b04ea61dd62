package jobs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

func setupOwner(t *testing.T) (*Owner, *events.Resources) {
	t.Helper()
	_, _, js := natstest.JetStream(t)
	res, err := events.Default.Setup(context.Background(), js, events.Options{})
	require.NoError(t, err)
	return New(events.Default, js, res, Config{}), res
}

func checksIn(t *testing.T, res *events.Resources) uint64 {
	t.Helper()
	info, err := res.Checks.Info(context.Background())
	require.NoError(t, err)
	return info.State.Msgs
}

func TestArmIsIdempotentAndRemoveStopsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, res := setupOwner(t)
	j := &state.Job{ID: "j3", Route: "r", RemoteID: "x", State: state.Queued}
	require.NoError(t, o.arm(ctx, j, time.Now(), 0))
	require.NoError(t, o.arm(ctx, j, time.Now(), 0), "already armed")
	require.Equal(t, uint64(1), checksIn(t, res))

	seen, err := o.currentCheck(ctx, "r", "j3")
	require.NoError(t, err)
	require.NotNil(t, seen.check.Poll, "a check carries the job's poll state")
	require.Equal(t, "x", seen.check.Poll.RemoteID)
	require.NoError(t, o.remove(ctx, "r", "j3", seen))
	require.NoError(t, o.remove(ctx, "r", "j3", seenCheck{}), "removing an unarmed job's check is fine")
	require.Zero(t, checksIn(t, res))
}

// An outsider reads a job's check, and before it removes the check a poll
// replaces it (or a poll's ack removes it): remove must remove whatever
// check is current, not fail on the sequence it read.
func TestRemoveFromAStaleRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, res := setupOwner(t)
	j := &state.Job{ID: "j5", Route: "r", RemoteID: "x", State: state.Queued}
	require.NoError(t, o.arm(ctx, j, time.Now(), 0))
	stale, err := o.currentCheck(ctx, "r", "j5")
	require.NoError(t, err)
	require.NotZero(t, stale.seq)
	_, err = o.publishCheck(ctx, "r", newCheck(j, time.Now(), 0), stale.seq)
	require.NoError(t, err)
	_, err = o.publishCheck(ctx, "r", newCheck(j, time.Now(), 0), stale.seq)
	require.ErrorIs(t, err, ErrCheckMoved, "replaced already")
	require.NoError(t, o.remove(ctx, "r", "j5", stale), "the check was replaced since it was read")
	require.Zero(t, checksIn(t, res), "the replacement is gone too")

	// Removed since it was read, by a sequence the stream is past.
	require.NoError(t, o.arm(ctx, j, time.Now(), 0))
	stale, err = o.currentCheck(ctx, "r", "j5")
	require.NoError(t, err)
	require.NoError(t, o.remove(ctx, "r", "j5", stale))
	require.NoError(t, o.remove(ctx, "r", "j5", stale), "removed since it was read")
	// And by a sequence beyond the stream's last.
	require.NoError(t, o.remove(ctx, "r", "j5", seenCheck{seq: stale.seq + 1000}))
}

// TestRemoveKeepsOtherChecks removes jobs' checks while a poller keeps
// other jobs' checks nak-delayed at the server: every check that was not
// removed must keep coming back. (A purge by subject fails this: see
// remove.)
func TestRemoveKeepsOtherChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o, res := setupOwner(t)
	c, err := events.EnsureConsumer(ctx, res.Checks, events.Default.PollerConsumerConfig("r", 0, 1, events.Options{}))
	require.NoError(t, err)

	const n = 300
	for i := range n {
		require.NoError(t, o.arm(ctx, &state.Job{ID: fmt.Sprintf("j%d", i), Route: "r", RemoteID: "x", State: state.Queued}, time.Time{}, 0))
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	var mu sync.Mutex
	rounds, finished := map[string]int{}, map[string]bool{}
	var wg sync.WaitGroup
	it, err := c.Messages(jetstream.PullMaxMessages(16))
	require.NoError(t, err)
	defer it.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		all := len(finished) == n
		mu.Unlock()
		if all {
			break
		}
		msg, err := it.Next(jetstream.NextMaxWait(2 * time.Second))
		if err != nil {
			continue
		}
		_, id, err := events.Default.ParseCheck(msg.Subject())
		require.NoError(t, err)
		mu.Lock()
		rounds[id]++
		k := rounds[id]
		mu.Unlock()
		delay := time.Duration(100+rnd.IntN(300)) * time.Millisecond
		switch x := rnd.IntN(10); {
		case k >= 4 && x < 3: // the job finished here
			require.NoError(t, msg.Term())
			mu.Lock()
			finished[id] = true
			mu.Unlock()
		case k >= 3 && x < 5: // the job finished elsewhere (a webhook) while its check waits
			require.NoError(t, msg.NakWithDelay(delay))
			wg.Go(func() {
				seen, err := o.currentCheck(ctx, "r", id)
				require.NoError(t, err)
				require.NoError(t, o.remove(ctx, "r", id, seen))
				mu.Lock()
				finished[id] = true
				mu.Unlock()
			})
		default:
			require.NoError(t, msg.NakWithDelay(delay))
		}
	}
	wg.Wait()
	mu.Lock()
	require.Len(t, finished, n, "a waiting check stopped being delivered")
	mu.Unlock()
	require.Eventually(t, func() bool { return checksIn(t, res) == 0 }, 5*time.Second, 20*time.Millisecond, "nothing left behind")
}

// Whether an outsider can take a check's count without holding it: only
// when no poll it made is missing from its content.
func TestCheckCounts(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ps := func(webhook bool) *events.PollState {
		return &events.PollState{RemoteID: "x", State: state.Running, Polls: 4, Webhook: webhook}
	}
	for name, tc := range map[string]struct {
		seen  seenCheck
		polls int
		exact bool
	}{
		"no check":           {seenCheck{}, 0, true},
		"unreadable":         {seenCheck{seq: 3}, 0, true},
		"no poll state":      {seenCheck{seq: 3, check: &events.Check{JobID: "j"}}, 0, true},
		"expects a webhook":  {seenCheck{seq: 3, check: &events.Check{JobID: "j", Due: now.Add(-time.Hour), Poll: ps(true)}}, 4, true},
		"not due yet":        {seenCheck{seq: 3, check: &events.Check{JobID: "j", Due: now.Add(time.Minute), Poll: ps(false)}}, 4, true},
		"due within margins": {seenCheck{seq: 3, check: &events.Check{JobID: "j", Due: now.Add(dueMargin / 2), Poll: ps(false)}}, 4, false},
		"polled since":       {seenCheck{seq: 3, check: &events.Check{JobID: "j", Due: now.Add(-time.Minute), Poll: ps(false)}}, 4, false},
	} {
		polls, exact := tc.seen.counts(now)
		require.Equal(t, tc.polls, polls, name)
		require.Equal(t, tc.exact, exact, name)
	}
}

// A poll state too big for a check (a provider reference of kilobytes) is
// left out rather than the check refused.
func TestEncodeCheckDropsAStateTooBig(t *testing.T) {
	t.Parallel()
	big := make([]byte, events.MaxCheckBytes)
	for i := range big {
		big[i] = 'x'
	}
	j := &state.Job{ID: "j", RemoteID: "x", State: state.Running, ProviderRef: []byte(`"` + string(big) + `"`)}
	b, err := EncodeCheck(j, time.Now())
	require.NoError(t, err)
	require.Less(t, len(b), events.MaxCheckBytes)
	c, err := events.DecodeCheck(b)
	require.NoError(t, err)
	require.Nil(t, c.Poll)
}

// A checks stream without message schedules (a server before 2.12 keeps
// the setting out) parks nothing: a schedule there would never fire.
func TestNoParkingWithoutSchedules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, _, js := natstest.JetStream(t)
	_, err := events.Default.Setup(ctx, js, events.Options{})
	require.NoError(t, err)
	cfg := events.Default.Streams(events.Options{})[1]
	require.NoError(t, js.DeleteStream(ctx, cfg.Name))
	cfg.AllowMsgSchedules, cfg.AllowRollup, cfg.Discard = false, false, jetstream.DiscardNew
	_, err = js.CreateStream(ctx, cfg)
	require.NoError(t, err)
	res, err := events.Default.Open(ctx, js)
	require.NoError(t, err)
	require.Zero(t, New(events.Default, js, res, Config{}).parkAfter, "no parking")

	res, err = events.Default.Setup(ctx, js, events.Options{})
	require.NoError(t, err)
	require.Equal(t, time.Minute, New(events.Default, js, res, Config{}).parkAfter, "parking once the stream allows schedules")
}
