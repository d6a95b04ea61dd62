package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// A submission's way through the contract, as a client, ingest and an
// event subscriber see it: Setup provisions what the subjects need; a
// client publishes on the route's intake subject; ingest takes each
// message from the route's durable consumer, decodes it (a bad one names
// its field) and settles its outcome in one place; the job's owner
// publishes each event once (its Nats-Msg-Id is MsgID); a subscriber
// reads it back.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "pollux-events-example")
	must(err)
	defer func() { _ = os.RemoveAll(dir) }()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true})
	must(err)
	srv.Start()
	defer srv.WaitForShutdown()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(10 * time.Second) {
		panic("nats-server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	must(err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	must(err)

	ns := events.Default
	res, err := ns.Setup(ctx, js, events.Options{})
	must(err)

	// A client submits two jobs to route "sim"; the second names no model.
	good, err := json.Marshal(events.Submit{V: events.Version, IdempotencyKey: "cat-1", Model: "owner/video",
		Input: json.RawMessage(`{"prompt":"a cat"}`)})
	must(err)
	for _, data := range [][]byte{good, []byte(`{"v":1,"input":{}}`)} {
		_, err := js.Publish(ctx, ns.Submit("sim"), data)
		must(err)
	}

	// Ingest: the route's durable consumer, the validating decoder, and
	// the outcome settled on the message (Ack, NakWithDelay or Term).
	intake, err := events.EnsureConsumer(ctx, res.Intake, ns.IngestConsumerConfig("sim", events.Options{}))
	must(err)
	var job string
	for range 2 {
		msg, err := intake.Next(jetstream.FetchMaxWait(5 * time.Second))
		must(err)
		kind, route, err := ns.ParseIntake(msg.Subject())
		must(err)
		m, err := events.DecodeSubmit(msg.Data())
		var bad *events.FieldError
		out := events.Done()
		switch {
		case errors.As(err, &bad):
			fmt.Printf("%s on %s refused: %s: %s\n", kind, route, bad.Field, bad.Problem)
			out = events.Stop() // a rejected event says why; never redelivered
		case err != nil:
			panic(err)
		default:
			job = events.KeyID(route, m.IdempotencyKey)
			fmt.Printf("%s on %s: job %s (key %s) of %s\n", kind, route, job, m.IdempotencyKey, m.Model)
		}
		fmt.Printf("settled: %s\n", out)
		must(out.Settle(msg))
	}

	// The owner publishes the job's first event, on the job's subject;
	// published again (a writer that died before it knew), it is dropped.
	now := time.Now().UTC()
	j := &state.Job{ID: job, Route: "sim", Model: "owner/video", State: state.Queued, RemoteID: "remote-1"}
	data, err := events.NewEvent(j, state.OutboxEvent{Seq: 1, Type: events.EventSubmitted, State: state.Queued, At: now}).Encode()
	must(err)
	for range 2 {
		ack, err := js.Publish(ctx, ns.Event("sim", job), data, jetstream.WithMsgID(events.MsgID(job, 1)))
		must(err)
		fmt.Printf("event published, duplicate: %t\n", ack.Duplicate)
	}

	// A subscriber of the job's events.
	sub, err := js.OrderedConsumer(ctx, ns.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{ns.Event("sim", job)}})
	must(err)
	msg, err := sub.Next(jetstream.FetchMaxWait(5 * time.Second))
	must(err)
	ev, err := events.DecodeEvent(msg.Data())
	must(err)
	fmt.Printf("%s: event %d, %s (%s), remote id %s\n", msg.Subject(), ev.Seq, ev.Type, ev.State, ev.Job.RemoteID)
	// Output:
	// submit on sim: job k-vmwficiv7phi7csdprs2hjtx7i (key cat-1) of owner/video
	// settled: done
	// submit on sim refused: model: required
	// settled: stop
	// event published, duplicate: false
	// event published, duplicate: true
	// pollux.events.sim.k-vmwficiv7phi7csdprs2hjtx7i: event 1, submitted (queued), remote id remote-1
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
