package client_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/client"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// Custody events follow a job's terminal event with its terminal state:
// Wait returns the terminal event, and Events ends with it.
func TestCustodyEventsFollowTheEnd(t *testing.T) {
	t.Parallel()
	_, nc, js := natstest.JetStream(t)
	_, err := events.Default.Setup(t.Context(), js, events.Options{})
	require.NoError(t, err)
	j := &state.Job{ID: "job", Route: "r", Model: "m", State: state.Queued}
	for _, typ := range []string{events.EventSubmitted, events.EventSucceeded, events.EventOutputsSaved, events.EventOutputsExpiring} {
		if typ == events.EventSucceeded {
			j.State = state.Succeeded
		}
		j.Record(typ, j.CreatedAt)
	}
	for _, p := range j.Outbox {
		b, err := events.NewEvent(j, p).Encode()
		require.NoError(t, err)
		_, err = js.Publish(t.Context(), events.Default.Event("r", "job"), b, jetstream.WithMsgID(events.MsgID("job", p.Seq)))
		require.NoError(t, err)
	}
	c, err := client.New(nc)
	require.NoError(t, err)
	final, err := c.Wait(ctxFor(t), client.Job{Route: "r", ID: "job"})
	require.NoError(t, err)
	require.Equal(t, events.EventSucceeded, final.Type)
	var types []string
	for ev, err := range c.Events(ctxFor(t), client.Job{Route: "r", ID: "job"}) {
		require.NoError(t, err)
		types = append(types, ev.Type)
	}
	require.Equal(t, []string{"submitted", "succeeded"}, types)
}
