package poller

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/config"
	"github.com/pollux-dev/pollux/internal/route"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/state"
)

// delivery is a check message at one of its deliveries.
type delivery struct {
	jetstream.Msg
	subject string
	data    []byte
	md      jetstream.MsgMetadata
}

func (d delivery) Subject() string                           { return d.subject }
func (d delivery) Data() []byte                              { return d.data }
func (d delivery) Metadata() (*jetstream.MsgMetadata, error) { return &d.md, nil }

type idle struct{ provider.Adapter }

func (idle) Info() provider.Info { return provider.Info{Kind: "idle"} }

// The deliveries of a check that make no call: the first one only arms
// it, waiting out its not-before; a first delivery long after that (a new
// consumer after a repartition) waits a random part of one poll interval
// rather than polling at once; a context that says the job finished ends
// the check.
func TestDeliveriesThatDoNotPoll(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	rt, err := route.New("r", idle{}, config.Route{Poll: config.Poll{MaxDelay: time.Minute}}, 1)
	require.NoError(t, err)
	s := &Service{cfg: Config{Now: func() time.Time { return now }}, ns: events.Default, rnd: rand.New(rand.NewPCG(1, 2))}
	check := func(j *state.Job, notBefore time.Time, delivered uint64) events.Outcome {
		b, err := json.Marshal(events.NewCheck(j, notBefore))
		require.NoError(t, err)
		return s.check(context.Background(), rt, delivery{subject: events.Default.Check("r", j.ID), data: b,
			md: jetstream.MsgMetadata{NumDelivered: delivered, Sequence: jetstream.SequencePair{Stream: 9}}})
	}
	j := &state.Job{ID: "job-1", Route: "r", RemoteID: "x", State: state.Running, CreatedAt: now}

	out := check(j, now.Add(3*time.Second), 1)
	require.True(t, out.IsLater())
	require.Equal(t, 3*time.Second, out.Delay(), "armed: waits out its not-before")

	out = check(j, now.Add(-time.Second), 1)
	require.True(t, out.IsLater())
	require.Zero(t, out.Delay(), "armed late: polls at its next delivery")

	var longest time.Duration
	for range 20 {
		out = check(j, now.Add(-2*time.Hour), 1)
		require.True(t, out.IsLater())
		require.Less(t, out.Delay(), rt.Policy.Longest(), "handed over by a new consumer: spread over one interval")
		longest = max(longest, out.Delay())
	}
	require.Greater(t, longest, rt.Policy.Longest()/2, "spread, not all at once")

	done := *j
	done.State = state.Succeeded
	require.True(t, check(&done, now, 2).IsStop(), "a finished job's check ends")
}
