package poller

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider"
	"github.com/pollux-dev/pollux/pkg/schedule"
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

// The first delivery of a check makes no call: it waits out the check's
// due time; a first delivery long after that (a new consumer after a
// repartition) waits a random part of one poll interval rather than
// polling at once.
func TestFirstDeliveryOnlyArms(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	rt, err := route.New("r", idle{}, config.Route{Poll: config.Poll{MaxDelay: time.Minute}}, 1)
	require.NoError(t, err)
	s := &Service{cfg: Config{Now: func() time.Time { return now }}, ns: events.Default, rnd: schedule.NewRand(1),
		jobs: jobs.New(events.Default, nil, &events.Resources{}, jobs.Config{}).Polls()}
	check := func(due time.Time) events.Outcome {
		j := &state.Job{ID: "job-1", Route: "r", RemoteID: "x", State: state.Running, CreatedAt: now}
		b, err := json.Marshal(events.Check{V: events.Version, JobID: j.ID, Due: due, Poll: events.PollStateOf(j)})
		require.NoError(t, err)
		return s.check(context.Background(), rt, delivery{subject: events.Default.Check("r", j.ID), data: b,
			md: jetstream.MsgMetadata{NumDelivered: 1, Sequence: jetstream.SequencePair{Stream: 9}}})
	}

	out := check(now.Add(3 * time.Second))
	require.True(t, out.IsLater())
	require.Equal(t, 3*time.Second, out.Delay(), "armed: waits out its due time")

	out = check(now.Add(-time.Second))
	require.True(t, out.IsLater())
	require.Zero(t, out.Delay(), "armed late: polls at its next delivery")

	var longest time.Duration
	for range 20 {
		out = check(now.Add(-2 * time.Hour))
		require.True(t, out.IsLater())
		require.Less(t, out.Delay(), rt.Policy.Longest(), "handed over by a new consumer: spread over one interval")
		longest = max(longest, out.Delay())
	}
	require.Greater(t, longest, rt.Policy.Longest()/2, "spread, not all at once")

	bad := s.check(context.Background(), rt, delivery{subject: events.Default.Check("r", "job-1"), data: []byte(`{"v":1,`),
		md: jetstream.MsgMetadata{NumDelivered: 1}})
	require.True(t, bad.IsStop(), "an unusable check is dropped")
}
