package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

// instant is a provider that answers every call at once: every job it is
// asked about is running, and stays so. It isolates what Pollux and
// JetStream cost per poll from what a provider costs.
type instant struct{}

func (instant) Info() provider.Info {
	return provider.Info{Kind: "instant", Idempotent: true, Cancel: true}
}

func (instant) Submit(_ context.Context, req provider.SubmitRequest) (provider.Status, error) {
	return provider.Status{RemoteID: "r-" + req.JobID, Observation: state.Observation{State: state.Queued, Raw: "starting"}}, nil
}

func (instant) Status(context.Context, provider.Ref) (provider.Status, error) {
	return provider.Status{Observation: state.Observation{State: state.Running, Raw: "processing"}}, nil
}

func (instant) Cancel(context.Context, provider.Ref) (provider.Status, error) {
	return provider.Status{Observation: state.Observation{State: state.Canceled, Raw: "canceled"}}, nil
}

// seed writes n running jobs of route straight into the jobs bucket and
// arms their checks, the first due at first(i): the state ingest would
// leave after tracking them, at stream speed rather than ingest speed
// (which is measured on its own). remote(i) names job i at the provider.
// Traced jobs have a trace context (benchTrace), as with tracing on.
func seed(ctx context.Context, js jetstream.JetStream, ns events.Namespace, res *events.Resources, route string, n int,
	first func(i int) time.Time, remote func(i int) string, progress func(done int), traced bool) error {
	now := time.Now().UTC()
	bucket := "$KV." + res.Jobs.Bucket() + "."
	w := &pubWindow{js: js}
	for i := range n {
		id := jobID(i)
		due := first(i).UTC()
		j := benchJob(id, route, remote(i), now, due)
		if traced {
			j.Trace = benchTrace(i)
		}
		rec, err := json.Marshal(j)
		if err != nil {
			return err
		}
		chk, err := jobs.EncodeCheck(j, due)
		if err != nil {
			return err
		}
		if err := w.publish(ctx, bucket+id, rec, jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
			return fmt.Errorf("seeding: %w", err)
		}
		if err := w.publish(ctx, ns.Check(route, id), chk); err != nil {
			return fmt.Errorf("seeding: %w", err)
		}
		if progress != nil && (i+1)%10_000 == 0 {
			progress(i + 1)
		}
	}
	return w.flush(ctx)
}

func jobID(i int) string { return fmt.Sprintf("bench-%07d", i) }

// benchJob is a running job as the bench seeds it.
func benchJob(id, route, remote string, now, due time.Time) *state.Job {
	return &state.Job{
		ID: id, Route: route, Model: "bench/model", RemoteID: remote, State: state.Running,
		ProviderStatus: "processing", Tracked: true, CreatedAt: now, SubmittedAt: now, ChangedAt: now,
		StartedAt: now, UpdatedAt: now, Deadline: now.Add(24 * time.Hour), NextCheckAt: due, Polls: 3,
	}
}

// benchRecord is a seeded job's record, for the raw stateful reference.
var benchRecord = func() []byte {
	now := time.Now().UTC()
	b, err := json.Marshal(benchJob(jobID(0), benchRoute, remoteID(0), now, now))
	if err != nil {
		panic(err)
	}
	return b
}()
