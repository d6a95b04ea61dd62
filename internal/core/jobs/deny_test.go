package jobs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// deniedEvents starts a server where user "admin" may do anything and
// user "mute" anything but publish events, and connects as each.
func deniedEvents(t *testing.T) (admin, mute jetstream.JetStream) {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(`
listen: "127.0.0.1:-1"
jetstream { store_dir: %q }
accounts {
  APP {
    jetstream: enabled
    users: [
      { user: admin, password: admin }
      { user: mute, password: mute, permissions: { publish: { allow: [">"], deny: ["pollux.events.>"] } } }
    ]
  }
}
`, filepath.Join(dir, "js"))), 0o600))
	srv := natstest.ServerWithConfig(t, conf)
	return natstest.ConnectAs(t, srv, "admin"), natstest.ConnectAs(t, srv, "mute")
}

// A poll that ends a job whose end cannot be published keeps trying while
// it may, and then leaves the check out, so that the check's next poll
// publishes the end: a job never ends without its terminal event.
func TestAnEndThatCannotBePublishedKeepsItsCheck(t *testing.T) {
	t.Parallel()
	admin, mute := deniedEvents(t)
	r := rigOn(t, admin)
	r.submit("e1", false, time.Now())
	res, err := events.Default.Open(r.ctx, mute)
	require.NoError(t, err)
	muted := jobs.New(events.Default, mute, res, jobs.Config{})

	msg := r.next()
	require.NoError(t, msg.NakWithDelay(0)) // the first delivery only arms
	msg = r.next()
	d, err := muted.Polls().Open(r.ctx, msg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(r.ctx, time.Second)
	defer cancel()
	_, err = muted.Polls().Polled(ctx, d, d.Fold(jobs.Call{At: time.Now(), Status: done()}), jobs.Decision{Due: time.Now()})
	require.Error(t, err, "the end was not published")
	require.Equal(t, state.Succeeded, r.get("e1").State, "the record has the end")
	require.NotZero(t, r.check("e1").Seq, "the check stays")
	require.Equal(t, []string{events.EventSubmitted}, types(r.events("e1")))
	require.NoError(t, msg.NakWithDelay(0))

	d, msg = r.poll()
	polled, err := r.o.Polls().Polled(r.ctx, d, d.Fold(jobs.Call{At: time.Now(), Status: done()}), jobs.Decision{Due: time.Now()})
	require.NoError(t, err)
	r.settle(msg, polled.Outcome)
	require.Equal(t, []string{events.EventSubmitted, events.EventSucceeded}, types(r.events("e1")))
	require.Zero(t, r.check("e1").Seq)
	require.Equal(t, 2, r.get("e1").Polls, "both status calls counted")
}

// A webhook that ends a job whose end cannot be published fails, keeping
// the check, and its retry publishes the end before the check goes.
func TestAWebhookEndThatCannotBePublishedIsRetried(t *testing.T) {
	t.Parallel()
	admin, mute := deniedEvents(t)
	r := rigOn(t, admin)
	r.submit("e2", true, time.Now().Add(time.Hour))
	res, err := events.Default.Open(r.ctx, mute)
	require.NoError(t, err)
	muted := jobs.New(events.Default, mute, res, jobs.Config{})

	n := succeeded("d1", "rem-e2")
	n.JobID = "e2"
	ctx, cancel := context.WithTimeout(r.ctx, time.Second)
	defer cancel()
	_, err = muted.Webhooks().Webhook(ctx, n)
	require.ErrorContains(t, err, "publish the end", "the end was not published")
	require.Equal(t, state.Succeeded, r.get("e2").State)
	require.NotZero(t, r.check("e2").Seq, "the check stays")

	_, err = r.o.Webhooks().Webhook(r.ctx, n) // the delivery's retry
	require.NoError(t, err)
	require.Equal(t, []string{events.EventSubmitted, events.EventSucceeded}, types(r.events("e2")))
	require.Zero(t, r.check("e2").Seq)
	require.Equal(t, 1, r.get("e2").Webhooks)
}
