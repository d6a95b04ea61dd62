package lifecycle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/lifecycle"
	"github.com/pollux-dev/pollux/internal/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

func setup(t *testing.T) (*lifecycle.Lifecycle, jetstream.JetStream, *events.Resources) {
	t.Helper()
	_, _, js := natstest.JetStream(t)
	res, err := events.Default.Setup(context.Background(), js, events.Options{})
	require.NoError(t, err)
	return lifecycle.New(events.Default, js, res, zerolog.Nop(), lifecycle.Hooks{}), js, res
}

func eventsOf(t *testing.T, js jetstream.JetStream, route, id string) []*events.Event {
	t.Helper()
	ctx := context.Background()
	c, err := js.OrderedConsumer(ctx, events.Default.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.Default.Event(route, id)},
	})
	require.NoError(t, err)
	var out []*events.Event
	for {
		msg, err := c.Next(jetstream.FetchMaxWait(300 * time.Millisecond))
		if err != nil {
			return out
		}
		ev, err := events.DecodeEvent(msg.Data())
		require.NoError(t, err)
		out = append(out, ev)
	}
}

func TestUpdatePublishesInOrderAndClearsTheOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, js, _ := setup(t)
	now := time.Now().UTC()
	j := &state.Job{ID: "j1", Route: "r", State: state.Queued, CreatedAt: now}
	j.Record(events.EventSubmitted, now)
	require.NoError(t, l.Create(ctx, j))

	_, err := l.Update(ctx, "j1", func(cur *state.Job) error {
		cur.Apply(state.Observation{State: state.Running, At: now})
		cur.Apply(state.Observation{State: state.Succeeded, At: now})
		return nil
	})
	require.NoError(t, err)

	got, _, err := l.Store().Get(ctx, "j1")
	require.NoError(t, err)
	require.Empty(t, got.Outbox)
	evs := eventsOf(t, js, "r", "j1")
	require.Len(t, evs, 3)
	for i, typ := range []string{"submitted", "running", "succeeded"} {
		require.Equal(t, typ, evs[i].Type)
		require.Equal(t, uint64(i+1), evs[i].Seq)
	}
	require.Equal(t, state.Succeeded, evs[2].Job.State)
	require.Nil(t, evs[2].Job.Outbox, "snapshots carry no outbox")
}

// A writer that died between its KV write and its publish leaves the event
// in the outbox; the next one to flush publishes it, once.
func TestFlushRecoversAnUnpublishedEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, js, _ := setup(t)
	now := time.Now().UTC()
	j := &state.Job{ID: "j2", Route: "r", State: state.Running, CreatedAt: now}
	j.Record(events.EventSubmitted, now)
	j.Apply(state.Observation{State: state.Succeeded, At: now})
	_, err := l.Store().Create(ctx, j) // written, not published: the "crash"
	require.NoError(t, err)

	stale := *j
	stale.Outbox = append([]state.OutboxEvent(nil), j.Outbox...)
	require.NoError(t, l.Flush(ctx, j))
	require.NoError(t, l.Flush(ctx, &stale), "a second flusher with a stale copy")

	evs := eventsOf(t, js, "r", "j2")
	require.Len(t, evs, 2, "each event published once")
	require.Equal(t, []uint64{1, 2}, []uint64{evs[0].Seq, evs[1].Seq})
	got, _, err := l.Store().Get(ctx, "j2")
	require.NoError(t, err)
	require.Empty(t, got.Outbox)
}

func TestArmIsIdempotentAndDisarmStopsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _, res := setup(t)
	j := &state.Job{ID: "j3", Route: "r"}
	require.NoError(t, l.Arm(ctx, j, time.Now()))
	require.NoError(t, l.Arm(ctx, j, time.Now()), "already armed")
	info, err := res.Checks.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs)

	require.NoError(t, l.Disarm(ctx, "r", "j3", nil))
	require.NoError(t, l.Disarm(ctx, "r", "j3", nil), "disarming an unarmed job is fine")
	info, err = res.Checks.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs)

	require.NoError(t, l.Rearm(ctx, j, time.Now(), nil))
	info, err = res.Checks.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs)
}

// A webhook reads a job's check, and before it disarms the check a poll
// replaces it (or a poll's ack removes it): Disarm must remove whatever
// check is current, not fail on the sequence it read.
func TestDisarmFromAStaleRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _, res := setup(t)
	j := &state.Job{ID: "j5", Route: "r"}
	require.NoError(t, l.Arm(ctx, j, time.Now()))
	stale, err := l.CurrentCheck(ctx, "r", "j5")
	require.NoError(t, err)
	require.NotZero(t, stale.Seq)
	require.NoError(t, l.Replace(ctx, j, stale.Seq, time.Now()))
	require.NoError(t, l.Disarm(ctx, "r", "j5", stale), "the check was replaced since it was read")
	info, err := res.Checks.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "the replacement is gone too")

	// Removed since it was read, by a sequence the stream is past.
	require.NoError(t, l.Arm(ctx, j, time.Now()))
	stale, err = l.CurrentCheck(ctx, "r", "j5")
	require.NoError(t, err)
	require.NoError(t, l.Disarm(ctx, "r", "j5", nil))
	require.NoError(t, l.Disarm(ctx, "r", "j5", stale), "removed since it was read")
	// And by a sequence beyond the stream's last.
	require.NoError(t, l.Disarm(ctx, "r", "j5", &lifecycle.Seen{Seq: stale.Seq + 1000}))
}

// TestDisarmKeepsOtherChecks disarms jobs while a poller keeps other jobs'
// checks nak-delayed at the server: every check that was not disarmed must
// keep coming back. (A purge by subject fails this: see Disarm.)
func TestDisarmKeepsOtherChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _, res := setup(t)
	c, err := events.EnsureConsumer(ctx, res.Checks, events.Default.PollerConsumerConfig("r", 0, 1, events.Options{}))
	require.NoError(t, err)

	const n = 300
	for i := range n {
		require.NoError(t, l.Arm(ctx, &state.Job{ID: fmt.Sprintf("j%d", i), Route: "r"}, time.Time{}))
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
				require.NoError(t, l.Disarm(ctx, "r", id, nil))
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
	require.Eventually(t, func() bool {
		info, err := res.Checks.Info(ctx)
		return err == nil && info.State.Msgs == 0
	}, 5*time.Second, 20*time.Millisecond, "nothing left behind")
}

func TestRejectOncePerIntakeMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, js, _ := setup(t)
	r := events.Rejection{Kind: "submit", Subject: "pollux.submit.r", IntakeSeq: 42, Field: "model", Error: "model: required"}
	require.NoError(t, l.Reject(ctx, "r", "j4", r, time.Now()))
	require.NoError(t, l.Reject(ctx, "r", "j4", r, time.Now()), "a redelivery of the same intake message")
	evs := eventsOf(t, js, "r", "j4")
	require.Len(t, evs, 1)
	require.Equal(t, "model", evs[0].Rejection.Field)

	r.IntakeSeq = 43
	require.NoError(t, l.Reject(ctx, "bad route!", "bad id!", r, time.Now()))
	evs = eventsOf(t, js, "_", "_")
	require.Len(t, evs, 1, "invalid tokens are replaced by placeholders")
	require.Equal(t, "_", evs[0].Route)
}
