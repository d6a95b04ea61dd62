package consume_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/consume"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
)

func setup(t *testing.T, ackWait time.Duration) (jetstream.JetStream, jetstream.Consumer) {
	t.Helper()
	_, _, js := natstest.JetStream(t)
	ctx := context.Background()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "W", Subjects: []string{"w.>"}, Retention: jetstream.WorkQueuePolicy})
	require.NoError(t, err)
	c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, MaxDeliver: -1})
	require.NoError(t, err)
	return js, c
}

// A handler slower than the ack wait keeps its message: no other worker
// (or process) gets it meanwhile.
func TestSlowHandlersKeepTheirMessages(t *testing.T) {
	t.Parallel()
	js, c := setup(t, time.Second)
	_, err := js.Publish(context.Background(), "w.1", []byte("x"))
	require.NoError(t, err)
	var deliveries atomic.Int32
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 { // two "processes"
		wg.Go(func() {
			_ = consume.Run(ctx, c, consume.Options{Workers: 2}, func(context.Context, jetstream.Msg) events.Outcome {
				if deliveries.Add(1) == 1 {
					<-time.After(2500 * time.Millisecond) // a slow provider call
					close(done)
				}
				return events.Done()
			})
		})
	}
	<-done
	cancel()
	wg.Wait()
	require.Equal(t, int32(1), deliveries.Load(), "delivered once, although the call outlasted the ack wait")
}

// Messages fetched and waiting for a busy worker are kept too: one worker
// is stuck on the first of four messages for more than twice the ack wait,
// the other three wait in line meanwhile, and no other process gets any of
// them.
func TestWaitingMessagesAreKept(t *testing.T) {
	t.Parallel()
	js, c := setup(t, time.Second)
	for i := range 4 {
		_, err := js.Publish(context.Background(), fmt.Sprintf("w.%d", i), []byte("x"))
		require.NoError(t, err)
	}
	var seen tally
	var handled atomic.Int32
	release := make(chan struct{}) // the stuck provider call returns
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	run := func(handle func()) {
		wg.Go(func() {
			_ = consume.Run(ctx, c, consume.Options{Workers: 1, Buffer: 3}, func(_ context.Context, m jetstream.Msg) events.Outcome {
				seen.add(m.Subject())
				handle()
				handled.Add(1)
				return events.Done()
			})
		})
	}
	run(func() { <-release }) // takes all four at once
	require.Eventually(t, func() bool { return seen.total() > 0 }, 5*time.Second, 10*time.Millisecond)
	run(func() {}) // an idle second process, ready for any redelivery
	require.Never(t, func() bool { return seen.total() > 1 }, 2500*time.Millisecond, 50*time.Millisecond,
		"while the first call is stuck, the three in line are neither handled nor redelivered")
	close(release)
	require.Eventually(t, func() bool { return handled.Load() >= 4 }, 10*time.Second, 20*time.Millisecond)
	cancel()
	wg.Wait()
	require.Equal(t, map[string]int{"w.0": 1, "w.1": 1, "w.2": 1, "w.3": 1}, seen.snapshot(), "each delivered once")
}

// Outcomes are settled: Later comes back after its delay, Stop and Done
// never again; holding off stops taking messages.
func TestOutcomesAndHold(t *testing.T) {
	t.Parallel()
	js, c := setup(t, 5*time.Second)
	for _, s := range []string{"w.done", "w.stop", "w.later"} {
		_, err := js.Publish(context.Background(), s, nil)
		require.NoError(t, err)
	}
	var seen tally
	var held atomic.Bool
	held.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := runInBackground(ctx, c, consume.Options{Workers: 4, Hold: func() time.Duration {
		if held.Load() {
			return 20 * time.Millisecond
		}
		return 0
	}}, func(_ context.Context, m jetstream.Msg) events.Outcome {
		seen.add(m.Subject())
		switch m.Subject() {
		case "w.stop":
			return events.Stop()
		case "w.later":
			return events.Later(100 * time.Millisecond)
		}
		return events.Done()
	})
	require.Never(t, func() bool { return seen.total() > 0 }, 200*time.Millisecond, 20*time.Millisecond, "held: nothing taken")
	held.Store(false)
	require.Eventually(t, func() bool { return seen.of("w.later") >= 3 }, 5*time.Second, 10*time.Millisecond,
		"a Later message keeps coming back")
	require.Equal(t, 1, seen.of("w.done"))
	require.Equal(t, 1, seen.of("w.stop"))
	cancel()
	require.NoError(t, <-errc)
}

// A consumer deleted while in use ends Run with ErrConsumerGone (so the
// caller can re-create or re-discover it) instead of retrying forever.
func TestDeletedConsumerEndsRun(t *testing.T) {
	t.Parallel()
	js, c := setup(t, 5*time.Second)
	ctx := context.Background()
	_, err := js.Publish(ctx, "w.1", []byte("x"))
	require.NoError(t, err)
	handled := make(chan struct{}, 1)
	done := runInBackground(ctx, c, consume.Options{Workers: 2}, func(context.Context, jetstream.Msg) events.Outcome {
		handled <- struct{}{}
		return events.Done()
	})
	<-handled
	s, err := js.Stream(ctx, "W")
	require.NoError(t, err)
	require.NoError(t, s.DeleteConsumer(ctx, "c"))
	select {
	case err := <-done:
		require.ErrorIs(t, err, consume.ErrConsumerGone)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not notice its consumer was deleted")
	}
}

// Recreate creates a deleted consumer again and goes on consuming.
func TestRecreateAfterDelete(t *testing.T) {
	t.Parallel()
	js, c := setup(t, 5*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := js.Stream(ctx, "W")
	require.NoError(t, err)
	handled := make(chan string, 4)
	done := make(chan error, 1)
	go func() {
		done <- consume.Recreate(ctx, c, func(ctx context.Context) (jetstream.Consumer, error) {
			return s.CreateOrUpdateConsumer(ctx, c.CachedInfo().Config)
		}, consume.Options{Workers: 2}, func(_ context.Context, msg jetstream.Msg) events.Outcome {
			handled <- msg.Subject()
			return events.Done()
		})
	}()
	_, err = js.Publish(ctx, "w.1", []byte("x"))
	require.NoError(t, err)
	require.Equal(t, "w.1", <-handled)
	require.NoError(t, s.DeleteConsumer(ctx, "c"))
	_, err = js.Publish(ctx, "w.2", []byte("x"))
	require.NoError(t, err)
	// w.1 may come again: its ack can reach the server after the delete.
	timeout := time.After(30 * time.Second)
	for got := ""; got != "w.2"; {
		select {
		case got = <-handled:
		case <-timeout:
			t.Fatal("the deleted consumer was not created again")
		}
	}
	cancel()
	require.NoError(t, <-done)
}

// A shutdown abandons nothing: messages keep arriving while Run stops, and
// once it has returned none is left delivered and unsettled (which would
// wait out the ack wait before anyone got it again). Canceling a pull
// request at the client does not cancel it at the server: messages already
// on their way to a dropped inbox were lost until the ack wait.
func TestShutdownAbandonsNothing(t *testing.T) {
	t.Parallel()
	js, c := setup(t, time.Minute)
	ctx := context.Background()
	for round := range 5 {
		rctx, cancel := context.WithCancel(ctx)
		var handled atomic.Int32
		done := runInBackground(rctx, c, consume.Options{Workers: 4}, func(context.Context, jetstream.Msg) events.Outcome {
			handled.Add(1)
			return events.Done()
		})
		stopPub := make(chan struct{})
		pubDone := make(chan struct{})
		go func() {
			defer close(pubDone)
			for i := 0; ; i++ {
				select {
				case <-stopPub:
					return
				default:
				}
				_, _ = js.PublishAsync(fmt.Sprintf("w.%d.%d", round, i), []byte("x"))
				if i%64 == 63 {
					<-js.PublishAsyncComplete()
				}
			}
		}()
		require.Eventually(t, func() bool { return handled.Load() > 2000 }, 10*time.Second, time.Millisecond)
		cancel() // mid-flow
		require.NoError(t, <-done)
		close(stopPub)
		<-pubDone
		<-js.PublishAsyncComplete()
		// Settles are sent without waiting for the server; give them a
		// moment, far below the ack wait an abandoned message waits out.
		require.Eventually(t, func() bool {
			info, err := c.Info(ctx)
			return err == nil && info.NumAckPending == 0
		}, 5*time.Second, 20*time.Millisecond, "round %d: messages delivered and abandoned at shutdown", round)
	}
}

// runInBackground runs consume.Run until ctx ends; the channel gives what
// it returned.
func runInBackground(ctx context.Context, c jetstream.Consumer, o consume.Options, h consume.Handler) <-chan error {
	done := make(chan error, 1)
	go func() { done <- consume.Run(ctx, c, o, h) }()
	return done
}

// tally counts deliveries by subject; handlers on many goroutines add to it.
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

// add counts one delivery of subject and returns its count so far.
func (t *tally) add(subject string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == nil {
		t.n = map[string]int{}
	}
	t.n[subject]++
	return t.n[subject]
}

func (t *tally) of(subject string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n[subject]
}

func (t *tally) total() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, k := range t.n {
		n += k
	}
	return n
}

func (t *tally) snapshot() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.n)
}
