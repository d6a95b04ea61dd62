package e2e_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/consume"
	"github.com/pollux-dev/pollux/internal/platform/embedded"
	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/events"
)

// TestChaosRestartOrphans restarts the server gracefully while a consumer
// acknowledges messages at full speed, round after round. nats-server
// 2.15.2 now and then keeps a message whose ack arrived during the
// shutdown (see consume.SweepOrphans); with the sweep, the work queue ends
// empty every time. The orphans swept are reported.
func TestChaosRestartOrphans(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("restarts a server")
	}
	dir, port := t.TempDir(), e2etest.FreePort(t)
	srv, err := embedded.Start(embedded.Config{StoreDir: dir, Port: port})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Shutdown() })
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "Q", Subjects: []string{"q.>"}, Retention: jetstream.WorkQueuePolicy})
	require.NoError(t, err)
	c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "q", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 2 * time.Second})
	require.NoError(t, err)
	var handled, swept atomic.Int64
	done := make(chan error, 1)
	go func() {
		done <- consume.Run(ctx, c, consume.Options{Workers: 16, Stream: s, Sweep: 200 * time.Millisecond,
			Swept: func(n int) { swept.Add(int64(n)) }},
			func(context.Context, jetstream.Msg) events.Outcome { handled.Add(1); return events.Done() })
	}()

	rounds := e2etest.Size(5, 40)
	const perRound = 4000
	for round := range rounds {
		for i := range perRound {
			for {
				if _, err := js.PublishAsync(fmt.Sprintf("q.%d.%d", round, i), []byte("x")); err == nil {
					break
				}
				<-js.PublishAsyncComplete()
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: publishing did not complete", round)
		}
		target := handled.Load() + perRound/2
		require.Eventually(t, func() bool { return handled.Load() >= target }, 30*time.Second, time.Millisecond)
		srv.Shutdown() // mid-flow: acks are arriving
		srv.WaitForShutdown()
		srv, err = embedded.Start(embedded.Config{StoreDir: dir, Port: port})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs == 0
	}, 60*time.Second, 50*time.Millisecond, "the work queue ends empty")
	cancel()
	require.NoError(t, <-done)
	t.Logf("%d graceful restarts under load: %d messages handled, %d orphans swept", rounds, handled.Load(), swept.Load())
}
