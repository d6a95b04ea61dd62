package index

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// BenchmarkHandle measures decoding and applying one job's event, without
// NATS: the index's own part of a replay.
func BenchmarkHandle(b *testing.B) {
	_, _, js := natstest.JetStream(b)
	x, err := New(Config{}, js, events.Default, nil)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now().UTC()
	msgs := make([][]byte, 100_000)
	subjects := make([]string, len(msgs))
	for i := range msgs {
		j := &state.Job{ID: fmt.Sprintf("bench-%07d", i), Route: "r", Model: "m", RemoteID: fmt.Sprintf("r-%07d", i), State: state.Running,
			ProviderStatus: "processing", CreatedAt: t0.Add(time.Duration(i) * time.Millisecond), UpdatedAt: t0, Deadline: t0, Polls: 3,
			Metadata: map[string]string{"user": "u1"}}
		ev := &events.Event{V: events.Version, Type: "running", Seq: 1, Time: t0, Route: "r", JobID: j.ID, State: j.State, Job: j}
		msgs[i], _ = ev.Encode()
		subjects[i] = events.Default.Event("r", j.ID)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		x.handle(subjects[i%len(msgs)], msgs[i%len(msgs)], uint64(i+1))
	}
}

// BenchmarkReplay measures a fresh index reading 50,000 events from an
// embedded server (ns/op is one replay).
func BenchmarkReplay(b *testing.B) {
	_, _, js := natstest.JetStream(b)
	res, err := events.Default.Setup(b.Context(), js, events.Options{})
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now().UTC()
	const n = 50_000
	for i := range n {
		j := &state.Job{ID: fmt.Sprintf("bench-%07d", i), Route: "r", Model: "m", RemoteID: fmt.Sprintf("r-%07d", i), State: state.Running,
			ProviderStatus: "processing", CreatedAt: t0.Add(time.Duration(i) * time.Millisecond), UpdatedAt: t0, Deadline: t0, Polls: 3,
			Metadata: map[string]string{"user": "u1"}}
		ev := &events.Event{V: events.Version, Type: "running", Seq: 1, Time: t0, Route: "r", JobID: j.ID, State: j.State, Job: j}
		data, _ := ev.Encode()
		if _, err := js.PublishAsync(events.Default.Event("r", j.ID), data); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			<-js.PublishAsyncComplete()
		}
	}
	<-js.PublishAsyncComplete()
	b.ResetTimer()
	for range b.N {
		x, err := New(Config{}, js, events.Default, res)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(b.Context())
		ready, done := make(chan struct{}), make(chan error, 1)
		go func() { done <- x.Run(ctx, ready) }()
		<-ready
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkList measures a page of 50 filtered by route and state among
// 100,000 jobs (four routes; a state in ten).
func BenchmarkList(b *testing.B) {
	_, _, js := natstest.JetStream(b)
	x, err := New(Config{}, js, events.Default, nil)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now().UTC()
	states := []state.State{state.Succeeded, state.Succeeded, state.Succeeded, state.Succeeded, state.Succeeded,
		state.Succeeded, state.Succeeded, state.Failed, state.Running, state.Queued}
	for i := range 100_000 {
		st := states[(i/4)%len(states)]
		x.applyEvent(&event{V: 1, Type: string(st), Seq: 1, Route: fmt.Sprintf("r%d", i%4), JobID: fmt.Sprintf("bench-%07d", i), State: st,
			Time: t0, Job: &snapshot{Model: "m", RemoteID: fmt.Sprintf("r-%07d", i), CreatedAt: t0.Add(time.Duration(i) * time.Millisecond)}}, uint64(i+1))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := x.List(Query{Route: fmt.Sprintf("r%d", i%4), States: []state.State{states[7+i%3]}}); err != nil {
			b.Fatal(err)
		}
	}
}
