package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/ingest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

// writeJobs is how many jobs the KV-writes figure follows.
const writeJobs = 200

// scripted is a provider whose every job goes queued (the create answer),
// then running (its first status call), then succeeded (every later one):
// three state changes from submit to terminal.
type scripted struct {
	mu    sync.Mutex
	calls map[string]int
}

func (*scripted) Info() provider.Info {
	return provider.Info{Kind: "scripted", Idempotent: true, Cancel: true}
}

func (*scripted) Submit(_ context.Context, req provider.SubmitRequest) (provider.Status, error) {
	return provider.Status{RemoteID: "r-" + req.JobID, Observation: state.Observation{State: state.Queued, Raw: "starting"}}, nil
}

func (s *scripted) Status(_ context.Context, ref provider.Ref) (provider.Status, error) {
	s.mu.Lock()
	s.calls[ref.ID]++
	n := s.calls[ref.ID]
	s.mu.Unlock()
	if n == 1 {
		return provider.Status{Observation: state.Observation{State: state.Running, Raw: "processing"}}, nil
	}
	return provider.Status{Observation: state.Observation{State: state.Succeeded, Raw: "succeeded", Outputs: []string{"https://example.com/out.mp4"}}}, nil
}

func (*scripted) Cancel(context.Context, provider.Ref) (provider.Status, error) {
	return provider.Status{Observation: state.Observation{State: state.Canceled, Raw: "canceled"}}, nil
}

// writes measures how many times the jobs bucket is written for a job
// from its submission to its terminal state, through the real ingest and
// poller, for jobs with three state changes (queued, running, succeeded).
// The bucket is fresh and holds only these jobs, so its stream's last
// sequence is every write made, whichever code path made it; the events
// stream (which keeps everything) says what each job went through.
func (r *runner) writes(ctx context.Context, nc *nats.Conn) error {
	r.progress("%d jobs through ingest and poller, each queued → running → succeeded", writeJobs)
	w, err := countWrites(ctx, nc, writeJobs)
	if err != nil {
		return err
	}
	per := float64(w.writes) / float64(writeJobs)
	r.progress("  %.2f KV writes per job, %.2f state changes per job (%d of %d jobs queued → running → succeeded)",
		per, float64(w.changes)/float64(writeJobs), w.exact, writeJobs)
	r.report.add(Row{Group: "ingest", Name: "KV writes per job, submit to terminal, 3 state changes", Value: per, Unit: "",
		Note: fmt.Sprintf("created pending, then queued → running → succeeded through ingest and poller (%d of %d jobs; the others fewer changes); every write of the jobs bucket counted", w.exact, writeJobs)}).
		atMost(4, "≤ 4: the create + one per change")
	return nil
}

// written is what countWrites saw.
type written struct {
	// writes is every write of the jobs bucket; changes the state
	// changes of all jobs; exact how many jobs went queued → running →
	// succeeded.
	writes, changes, exact int
}

// countWrites runs n jobs of the scripted provider through ingest and a
// poller in a fresh namespace and counts what was written.
func countWrites(ctx context.Context, nc *nats.Conn, n int) (written, error) {
	rc := config.Route{Poll: config.Poll{MinDelay: 10 * time.Millisecond, MaxDelay: 100 * time.Millisecond}}
	rg, err := openRig(ctx, nc, config.Streams{}, rc, &scripted{calls: map[string]int{}})
	if err != nil {
		return written{}, err
	}
	defer func() { _ = rg.close() }()
	oc, err := rg.env.JS.OrderedConsumer(ctx, rg.env.NS.EventsStream(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		return written{}, err
	}
	msgs, err := oc.Messages()
	if err != nil {
		return written{}, err
	}
	evs := make(chan *events.Event, 1024)
	done := make(chan struct{})
	var reading sync.WaitGroup
	defer func() {
		msgs.Stop()
		close(done)
		reading.Wait()
	}()
	reading.Go(func() {
		defer close(evs)
		for {
			m, err := msgs.Next()
			if err != nil {
				return
			}
			ev, err := events.DecodeEvent(m.Data())
			if err != nil {
				return
			}
			select {
			case evs <- ev:
			case <-done:
				return
			}
		}
	})
	svc, err := ingest.New(ingest.Config{Routes: rg.env.Routes, Options: rg.env.Options(), Metrics: rg.env.Metrics.Ingest()},
		rg.env.JS, rg.env.NS, rg.env.Res, rg.env.Jobs.Intake(), rg.env.Gates)
	if err != nil {
		return written{}, err
	}
	rg.g.Go(func() error { return svc.Run(rg.ctx) })
	if err := rg.startPoller(); err != nil {
		return written{}, err
	}
	for i := range n {
		b, err := json.Marshal(events.Submit{V: events.Version, ID: fmt.Sprintf("writes-%04d", i), Model: "bench/model", Input: json.RawMessage(`{}`)})
		if err != nil {
			return written{}, err
		}
		if _, err := rg.env.JS.Publish(ctx, rg.env.NS.Submit(benchRoute), b); err != nil {
			return written{}, err
		}
	}
	// Each job's state after each of its events.
	seen := map[string][]state.State{}
	finished := 0
	deadline := time.After(2 * time.Minute)
	for finished < n {
		select {
		case ev, ok := <-evs:
			if !ok {
				return written{}, errors.New("writes: the events consumer stopped")
			}
			seen[ev.JobID] = append(seen[ev.JobID], ev.State)
			if ev.State.Terminal() {
				finished++
			}
		case <-deadline:
			return written{}, fmt.Errorf("writes: %d of %d jobs finished within 2m", finished, n)
		case <-ctx.Done():
			return written{}, ctx.Err()
		}
	}
	// Writes after the terminal one (there should be none) count too.
	if err := sleep(ctx, time.Second); err != nil {
		return written{}, err
	}
	info, err := rg.env.JS.Stream(ctx, "KV_"+rg.env.Res.Jobs.Bucket())
	if err != nil {
		return written{}, err
	}
	changes, exact := 0, 0
	want := []state.State{state.Queued, state.Running, state.Succeeded}
	for id, states := range seen {
		if states[len(states)-1] != state.Succeeded {
			return written{}, fmt.Errorf("writes: job %s ended %s", id, states[len(states)-1])
		}
		changes += len(states)
		if slices.Equal(states, want) {
			exact++
		}
	}
	return written{writes: int(info.CachedInfo().State.LastSeq), changes: changes, exact: exact}, nil
}
