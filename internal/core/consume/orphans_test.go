package consume_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/consume"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
)

// A limits stream keeps what its consumers acknowledge, so every message a
// consumer acknowledged there has the shape of an orphan: below the ack
// floor, still stored. That makes the sweep testable without racing a
// server shutdown (the only way a work queue gets orphans).
func limitsStream(t *testing.T) (jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	_, _, js := natstest.JetStream(t)
	s, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "L", Subjects: []string{"l.>"}})
	require.NoError(t, err)
	return js, s
}

// publish puts n messages on each subject, interleaved, and returns their
// sequences by subject.
func publish(t *testing.T, js jetstream.JetStream, n int, subjects ...string) map[string][]uint64 {
	t.Helper()
	seqs := map[string][]uint64{}
	for i := range n {
		for _, s := range subjects {
			ack, err := js.Publish(context.Background(), s, fmt.Appendf(nil, "%d", i))
			require.NoError(t, err)
			seqs[s] = append(seqs[s], ack.Sequence)
		}
	}
	return seqs
}

// stored reports which of seqs the stream still stores.
func stored(t *testing.T, s jetstream.Stream, seqs []uint64) []bool {
	t.Helper()
	out := make([]bool, len(seqs))
	for i, seq := range seqs {
		_, err := s.GetMsg(context.Background(), seq)
		if err != nil {
			require.ErrorIs(t, err, jetstream.ErrMsgNotFound)
		}
		out[i] = err == nil
	}
	return out
}

// The sweep removes exactly the messages below the consumer's ack floor
// that its filter matches: not the one delivered and unacknowledged, not
// those after it, not another consumer's.
func TestSweepOrphansRemovesOnlyAcknowledged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js, s := limitsStream(t)
	seqs := publish(t, js, 6, "l.a.1", "l.b.1", "l.a.2")
	c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "a", FilterSubject: "l.a.*", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	// Of the 12 l.a messages: ack 5, hold the 6th, ack the 7th (above the
	// floor: the floor stops at the 6th), leave 5 undelivered.
	batch, err := c.Fetch(7, jetstream.FetchMaxWait(time.Second))
	require.NoError(t, err)
	i := 0
	for m := range batch.Messages() {
		if i != 5 {
			require.NoError(t, m.DoubleAck(ctx))
		}
		i++
	}
	require.Equal(t, 7, i)

	n, err := consume.SweepOrphans(ctx, s, c)
	require.NoError(t, err)
	require.Equal(t, 5, n)
	// l.a.1 and l.a.2 alternate: the first five l.a messages are l.a.1's
	// 0,1,2 and l.a.2's 0,1.
	require.Equal(t, []bool{false, false, false, true, true, true}, stored(t, s, seqs["l.a.1"]))
	require.Equal(t, []bool{false, false, true, true, true, true}, stored(t, s, seqs["l.a.2"]))
	require.Equal(t, slices.Repeat([]bool{true}, 6), stored(t, s, seqs["l.b.1"]), "another consumer's messages")

	n, err = consume.SweepOrphans(ctx, s, c)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to sweep")

	// A consumer that started after the stream's first message says nothing
	// about the messages before its start.
	late, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "late", FilterSubject: "l.b.*",
		AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: seqs["l.b.1"][3]})
	require.NoError(t, err)
	batch, err = late.Fetch(1, jetstream.FetchMaxWait(time.Second))
	require.NoError(t, err)
	for m := range batch.Messages() {
		require.NoError(t, m.DoubleAck(ctx))
	}
	n, err = consume.SweepOrphans(ctx, s, late)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, slices.Repeat([]bool{true}, 6), stored(t, s, seqs["l.b.1"]))
}

// asWorkQueue presents a limits stream as a work queue, so Run sweeps the
// messages its consumer acknowledges there.
type asWorkQueue struct{ jetstream.Stream }

func (s asWorkQueue) CachedInfo() *jetstream.StreamInfo {
	info := *s.Stream.CachedInfo()
	info.Config.Retention = jetstream.WorkQueuePolicy
	return &info
}

// Run sweeps a work queue's orphans now and then, and leaves a limits
// stream alone.
func TestRunSweepsWorkQueueOrphans(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		queue bool
	}{{"work queue", true}, {"limits", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			js, s := limitsStream(t)
			seqs := publish(t, js, 20, "l.x")["l.x"]
			c, err := s.CreateConsumer(context.Background(), jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy})
			require.NoError(t, err)
			stream := jetstream.Stream(s)
			if tc.queue {
				stream = asWorkQueue{s}
			}
			ctx, cancel := context.WithCancel(context.Background())
			var handled, swept atomic.Int32
			done := runInBackground(ctx, c, consume.Options{Workers: 2, Stream: stream, Sweep: 20 * time.Millisecond,
				Swept: func(n int) { swept.Add(int32(n)) }},
				func(context.Context, jetstream.Msg) events.Outcome { handled.Add(1); return events.Done() })
			require.Eventually(t, func() bool { return handled.Load() == 20 }, 10*time.Second, 10*time.Millisecond)
			if tc.queue {
				require.Eventually(t, func() bool {
					info, err := s.Info(context.Background())
					return err == nil && info.State.Msgs == 0
				}, 10*time.Second, 20*time.Millisecond, "every acknowledged message swept")
				require.Eventually(t, func() bool { return swept.Load() == 20 }, 5*time.Second, 10*time.Millisecond,
					"each removal observed")
				require.Never(t, func() bool { return swept.Load() != 20 }, 100*time.Millisecond, 10*time.Millisecond,
					"and observed once")
			} else {
				require.Never(t, func() bool {
					info, err := s.Info(context.Background())
					return err != nil || info.State.Msgs != 20
				}, 300*time.Millisecond, 20*time.Millisecond, "a limits stream keeps what was acknowledged")
				require.Equal(t, slices.Repeat([]bool{true}, 20), stored(t, s, seqs))
				require.Zero(t, swept.Load())
			}
			cancel()
			require.NoError(t, <-done)
		})
	}
}

// On a real work queue the sweep never touches a live message: the first
// ten are acknowledged at once (the ack floor moves past them), the other
// twenty wait nak-delayed above it meanwhile, sweeps run every few
// milliseconds, and each comes back and is handled.
func TestSweepKeepsLiveMessages(t *testing.T) {
	t.Parallel()
	js, c := setup(t, 2*time.Second)
	ctx := context.Background()
	s, err := js.Stream(ctx, "W")
	require.NoError(t, err)
	for i := range 30 {
		_, err := js.Publish(ctx, fmt.Sprintf("w.%d", i), []byte("x"))
		require.NoError(t, err)
	}
	var seen tally
	var finished atomic.Int32
	rctx, cancel := context.WithCancel(ctx)
	done := runInBackground(rctx, c, consume.Options{Workers: 1, Buffer: 1, Stream: s, Sweep: 5 * time.Millisecond},
		func(_ context.Context, m jetstream.Msg) events.Outcome {
			var i int
			_, _ = fmt.Sscanf(m.Subject(), "w.%d", &i)
			if seen.add(m.Subject()) == 1 && i >= 10 {
				return events.Later(500 * time.Millisecond)
			}
			finished.Add(1)
			return events.Done()
		})
	require.Eventually(t, func() bool { return finished.Load() == 30 }, 15*time.Second, 10*time.Millisecond,
		"every message handled to the end although sweeps ran meanwhile")
	cancel()
	require.NoError(t, <-done)
	for i := range 30 {
		require.Equal(t, 1+min(1, i/10), seen.of(fmt.Sprintf("w.%d", i)), "w.%d: once, or twice when nak-delayed", i)
	}
}
