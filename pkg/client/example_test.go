package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/polluxtest"
)

// Submit a job, follow its events, and read its outputs from the
// terminal event. Here the deployment is a fleet of this process
// (polluxtest); against a real one, client.New takes your NATS
// connection.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := polluxtest.New(ctx, polluxtest.Config{Sim: sim.Config{TimeScale: 100, Seed: 1}})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = f.Close() }()

	job, err := f.Client.Submit(ctx, f.Route, events.Submit{
		Model: "owner/video-model", IdempotencyKey: "order-1234",
		Input: json.RawMessage(`{"prompt":"a lighthouse at dusk"}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("job", job.ID)
	for ev, err := range f.Client.Events(ctx, job) {
		if err != nil {
			log.Fatal(err)
		}
		if ev.State.Terminal() {
			fmt.Println(ev.Type, "with", len(ev.Job.Outputs), "output")
		}
	}
	// Output:
	// job k-wewlb4tbpd6lb7dixqlipgkzxs
	// succeeded with 1 output
}
