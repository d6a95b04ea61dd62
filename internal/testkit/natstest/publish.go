package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// publishBatch is how many messages PublishMany has unacknowledged at
// once: well below the client's cap on async publishes in flight (4,000 by
// default). A publish past that cap waits for an ack for at most 200 ms
// and then fails with jetstream.ErrTooManyStalledMsgs, which a server slowed
// by a loaded machine (the race detector, other packages' tests) can take.
const publishBatch = 1000

// publishAckWait bounds the wait for one batch's acks: generous, for a
// loaded machine.
const publishAckWait = time.Minute

// PublishMany publishes n messages asynchronously, the i-th on the subject
// and with the data msg returns, and fails the test unless the stream
// stored every one: seeding a stream with many messages, fast, on any
// machine.
func PublishMany(t testing.TB, js jetstream.JetStream, n int, msg func(i int) (subject string, data []byte)) {
	t.Helper()
	acks := make([]jetstream.PubAckFuture, 0, publishBatch)
	for i := range n {
		subject, data := msg(i)
		f, err := js.PublishAsync(subject, data)
		if err != nil {
			t.Fatalf("publish %d of %d on %s: %v", i+1, n, subject, err)
		}
		acks = append(acks, f)
		if len(acks) == publishBatch || i == n-1 {
			waitAcks(t, acks)
			acks = acks[:0]
		}
	}
}

// waitAcks waits for every ack of a batch, and fails the test on a
// publish the stream refused or that was never answered.
func waitAcks(t testing.TB, acks []jetstream.PubAckFuture) {
	t.Helper()
	deadline := time.NewTimer(publishAckWait)
	defer deadline.Stop()
	for _, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatalf("publish on %s: %v", f.Msg().Subject, err)
		case <-deadline.C:
			t.Fatalf("publish on %s: no ack in %s", f.Msg().Subject, publishAckWait)
		}
	}
}
