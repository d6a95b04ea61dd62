package jobs_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/platform/embedded"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

// One job's life through the owner, as ingest and the poller drive it:
// ingest accepts the job, marks its submit attempt and records the
// provider's answer (which arms the job's check); the poller takes each
// delivery of the check, makes the status call, folds it and hands the
// owner its decision. Every write publishes the events it recorded.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "pollux-jobs-example")
	must(err)
	defer func() { _ = os.RemoveAll(dir) }()
	srv, err := embedded.Start(embedded.Config{StoreDir: dir})
	must(err)
	defer srv.WaitForShutdown()
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL())
	must(err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	must(err)
	res, err := events.Default.Setup(ctx, js, events.Options{})
	must(err)
	owner := jobs.New(events.Default, js, res, jobs.Config{})

	// Ingest, through its view of the owner: the submission, the
	// attempt, the provider's acceptance.
	intake := owner.Intake()
	now := time.Now().UTC()
	rec, _, err := intake.Accept(ctx, &state.Job{ID: "job-1", Route: "r", Model: "m", State: state.Pending,
		Input: []byte(`{"prompt":"a cat"}`), IdempotencyKey: "job-1", CreatedAt: now, Deadline: now.Add(time.Hour)})
	must(err)
	rec, err = intake.Attempt(ctx, rec, "attempt-1", nil, true)
	must(err)
	// ... the create call to the provider happens here ...
	_, err = intake.Submitted(ctx, rec, jobs.Created{RemoteID: "remote-1", Due: now,
		Obs: state.Observation{State: state.Queued, Raw: "queued", Source: state.FromSubmit, At: now}})
	must(err)

	// The poller, through its view: one consumer of the route's checks,
	// and the provider's answers to two status calls.
	polls := owner.Polls()
	checks, err := events.EnsureConsumer(ctx, res.Checks, events.Default.PollerConsumerConfig("r", 0, 1, events.Options{}))
	must(err)
	answers := []state.State{state.Running, state.Succeeded}
	for len(answers) > 0 {
		msg := nextCheck(checks)
		d, err := polls.Open(ctx, msg)
		must(err)
		if d.N <= 1 {
			// A check's first delivery waits until its poll is due.
			must(polls.Wait(ctx, d, now, 0).Settle(msg))
			continue
		}
		f := d.Fold(jobs.Call{At: time.Now().UTC(), Status: provider.Status{
			Observation: state.Observation{State: answers[0], Raw: string(answers[0])}}})
		answers = answers[1:]
		p, err := polls.Polled(ctx, d, f, jobs.Decision{Due: time.Now()})
		must(err)
		must(p.Outcome.Settle(msg))
		fmt.Printf("poll %d: %s, finished=%t\n", f.After.Polls, p.Job.State, p.Finished)
	}

	// The record has every poll; the check is gone.
	j, err := owner.Get(ctx, "job-1")
	must(err)
	check, err := owner.Check(ctx, "r", "job-1")
	must(err)
	fmt.Printf("record: %s after %d polls; check left: %t\n", j.State, j.Polls, check.Seq != 0)

	// What a consumer of the job's events sees.
	evs, err := js.OrderedConsumer(ctx, events.Default.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.Default.Event("r", "job-1")}})
	must(err)
	for {
		msg, err := evs.Next(jetstream.FetchMaxWait(5 * time.Second))
		must(err)
		ev, err := events.DecodeEvent(msg.Data())
		must(err)
		fmt.Printf("event %d: %s (%s)\n", ev.Seq, ev.Type, ev.State)
		if md, err := msg.Metadata(); err != nil || md.NumPending == 0 {
			break
		}
	}
	// Output:
	// poll 1: running, finished=false
	// poll 2: succeeded, finished=true
	// record: succeeded after 2 polls; check left: false
	// event 1: submitted (queued)
	// event 2: running (running)
	// event 3: succeeded (succeeded)
}

// nextCheck fetches the next delivery of a check.
func nextCheck(c jetstream.Consumer) jetstream.Msg {
	msg, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
	must(err)
	return msg
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
