package events_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
)

func TestSetupIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, _, js := natstest.JetStream(t)
	n := events.Default

	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			_, err := n.Setup(ctx, js, events.Options{})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	r, err := n.Setup(ctx, js, events.Options{})
	require.NoError(t, err)
	require.NotNil(t, r.Checks)
	require.NotNil(t, r.Jobs)

	// A changed limit is reconciled.
	r, err = n.Setup(ctx, js, events.Options{EventsMaxAge: time.Hour})
	require.NoError(t, err)
	info, err := r.Events.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, time.Hour, info.Config.MaxAge)
}

func TestSetupReportsIncompatibleStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, _, js := natstest.JetStream(t)
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "POLLUX_CHECKS", Subjects: []string{"pollux.checks.*.*.*"}, Retention: jetstream.LimitsPolicy,
	})
	require.NoError(t, err)

	_, err = events.Default.Setup(ctx, js, events.Options{})
	var ie *events.IncompatibleError
	require.True(t, errors.As(err, &ie), "got %v", err)
	require.Equal(t, "POLLUX_CHECKS", ie.Name)
	require.ErrorContains(t, err, "retention")
	require.ErrorContains(t, err, "nats stream rm POLLUX_CHECKS")

	// Left alone, not replaced.
	s, err := js.Stream(ctx, "POLLUX_CHECKS")
	require.NoError(t, err)
	require.Equal(t, jetstream.LimitsPolicy, s.CachedInfo().Config.Retention)
}

func TestEnsureConsumer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, _, js := natstest.JetStream(t)
	n := events.Default
	r, err := n.Setup(ctx, js, events.Options{})
	require.NoError(t, err)

	want := n.PollerConsumerConfig("rep", 0, 1, events.Options{})
	c, err := events.EnsureConsumer(ctx, r.Checks, want)
	require.NoError(t, err)
	cfg := c.CachedInfo().Config
	require.Equal(t, -1, cfg.MaxAckPending, "nak-delayed checks must not be capped")
	require.Equal(t, -1, cfg.MaxDeliver, "a long-tracked job must never be parked")
	require.Empty(t, cfg.BackOff)

	// Same again: fine. A changed ack wait: updated.
	_, err = events.EnsureConsumer(ctx, r.Checks, want)
	require.NoError(t, err)
	want.AckWait = 45 * time.Second
	c, err = events.EnsureConsumer(ctx, r.Checks, want)
	require.NoError(t, err)
	require.Equal(t, 45*time.Second, c.CachedInfo().Config.AckWait)

	// A different filter under the same name: incompatible.
	bad := want
	bad.FilterSubject = n.Checks("other")
	_, err = events.EnsureConsumer(ctx, r.Checks, bad)
	var ie *events.IncompatibleError
	require.True(t, errors.As(err, &ie), "got %v", err)
	require.ErrorContains(t, err, "filter subjects")
}

// failingCreates is a real stream whose first creates of a consumer the
// server fails with an error of its own, as a busy server can moments
// after it started.
type failingCreates struct {
	jetstream.Stream
	fail  int
	tries int
}

func (f *failingCreates) CreateConsumer(ctx context.Context, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	f.tries++
	if f.tries <= f.fail {
		return nil, &jetstream.APIError{Code: 500, ErrorCode: 10012, Description: "error creating store for consumer"}
	}
	return f.Stream.CreateConsumer(ctx, cfg)
}

// A consumer create the server failed is tried again, a few times; a
// refusal of the request is not.
func TestEnsureConsumerRetriesAServerError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, _, js := natstest.JetStream(t)
	n := events.Default
	r, err := n.Setup(ctx, js, events.Options{})
	require.NoError(t, err)

	s := &failingCreates{Stream: r.Checks, fail: 2}
	c, err := events.EnsureConsumer(ctx, s, n.PollerConsumerConfig("rep", 0, 1, events.Options{}))
	require.NoError(t, err)
	require.NotNil(t, c)
	require.Equal(t, 3, s.tries)

	s = &failingCreates{Stream: r.Checks, fail: 100}
	_, err = events.EnsureConsumer(ctx, s, n.PollerConsumerConfig("rep2", 0, 1, events.Options{}))
	require.ErrorContains(t, err, "error creating store for consumer")
	require.Equal(t, 5, s.tries, "bounded")
}

func TestChecksStreamHoldsOneMessagePerJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, _, js := natstest.JetStream(t)
	n := events.Default
	r, err := n.Setup(ctx, js, events.Options{})
	require.NoError(t, err)
	none := jetstream.WithExpectLastSequencePerSubject(0)

	first, err := js.Publish(ctx, n.Check("rep", "j1"), []byte(`{"v":1,"job_id":"j1"}`), none)
	require.NoError(t, err)
	_, err = js.Publish(ctx, n.Check("rep", "j1"), []byte(`{"v":1,"job_id":"j1"}`), none)
	require.Error(t, err, "arming an armed job is refused")
	_, err = js.Publish(ctx, n.Check("rep", "j1"), []byte(`{"v":1,"job_id":"j1"}`), jetstream.WithExpectLastSequencePerSubject(first.Sequence+100))
	require.Error(t, err, "replacing a check the publisher does not hold is refused")
	second, err := js.Publish(ctx, n.Check("rep", "j1"), []byte(`{"v":1,"job_id":"j1","not_before":"2030-01-01T00:00:00Z"}`),
		jetstream.WithExpectLastSequencePerSubject(first.Sequence))
	require.NoError(t, err, "the holder replaces its check")
	_, err = js.Publish(ctx, n.Check("rep", "j2"), []byte(`{"v":1,"job_id":"j2"}`), none)
	require.NoError(t, err)

	info, err := r.Checks.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(2), info.State.Msgs, "the replacement dropped the old check in the same step")
	m, err := r.Checks.GetLastMsgForSubject(ctx, n.Check("rep", "j1"))
	require.NoError(t, err)
	require.Equal(t, second.Sequence, m.Sequence)
}

// A checks stream made before poll contexts (which refused a second message
// per subject) and before parked checks (no parked subjects, no
// schedules, discard "new") is updated in place, keeping its checks.
func TestSetupUpgradesTheChecksStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, _, js := natstest.JetStream(t)
	n := events.Default
	old := n.Streams(events.Options{})[1]
	require.Equal(t, n.ChecksStream(), old.Name)
	old.DiscardNewPerSubject = true
	old.Discard = jetstream.DiscardNew
	old.Subjects = old.Subjects[:1]
	old.AllowMsgSchedules, old.AllowRollup = false, false
	_, err := js.CreateStream(ctx, old)
	require.NoError(t, err)
	_, err = js.Publish(ctx, n.Check("rep", "j1"), []byte(`{"v":1,"job_id":"j1"}`))
	require.NoError(t, err)

	r, err := n.Setup(ctx, js, events.Options{})
	require.NoError(t, err)
	info, err := r.Checks.Info(ctx)
	require.NoError(t, err)
	require.False(t, info.Config.DiscardNewPerSubject)
	require.True(t, info.Config.AllowMsgSchedules)
	require.Contains(t, info.Config.Subjects, n.AllParked())
	require.Equal(t, uint64(1), info.State.Msgs)

	// A stream with subjects Pollux does not use is not Pollux's.
	other := old
	other.Name, other.Subjects = "OTHER", []string{"elsewhere.>"}
	_, err = js.CreateStream(ctx, other)
	require.NoError(t, err)
	other.Subjects = []string{"elsewhere.more.>"}
	_, err = events.EnsureStream(ctx, js, other)
	var inc *events.IncompatibleError
	require.ErrorAs(t, err, &inc)
}

func TestOutcomeSettle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, _, js := natstest.JetStream(t)
	n := events.Default
	r, err := n.Setup(ctx, js, events.Options{})
	require.NoError(t, err)
	c, err := events.EnsureConsumer(ctx, r.Checks, n.PollerConsumerConfig("rep", 0, 1, events.Options{}))
	require.NoError(t, err)

	for _, j := range []string{"a", "b", "c"} {
		_, err = js.Publish(ctx, n.Check("rep", j), []byte(`{}`))
		require.NoError(t, err)
	}
	batch, err := c.Fetch(3, jetstream.FetchMaxWait(2*time.Second))
	require.NoError(t, err)
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	require.Len(t, msgs, 3)
	outcomes := map[string]events.Outcome{
		n.Check("rep", "a"): events.Done(),
		n.Check("rep", "b"): events.Stop(),
		n.Check("rep", "c"): events.Later(300 * time.Millisecond),
	}
	for _, m := range msgs {
		require.NoError(t, outcomes[m.Subject()].Settle(m))
	}

	// Only the delayed one comes back, after its delay.
	start := time.Now()
	again, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
	require.NoError(t, err)
	require.Equal(t, n.Check("rep", "c"), again.Subject())
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
	md, err := again.Metadata()
	require.NoError(t, err)
	require.Equal(t, uint64(2), md.NumDelivered)
	require.NoError(t, events.Done().Settle(again))

	// Ack and Term both removed their messages from the work queue.
	require.Eventually(t, func() bool {
		info, err := r.Checks.Info(ctx)
		return err == nil && info.State.Msgs == 0
	}, 5*time.Second, 20*time.Millisecond)
}
