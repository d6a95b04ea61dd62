package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/client"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
	"github.com/pollux-dev/pollux/polluxtest"
)

func fleet(t *testing.T, m sim.Model) *polluxtest.Fleet {
	t.Helper()
	return polluxtest.Start(t, polluxtest.Config{Sim: sim.Config{TimeScale: 50, Seed: 7, Default: m},
		Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)})
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// A job submitted through the client is created once at the provider and
// ends; its events come in order, the last one terminal, and its record
// says what the provider said.
func TestSubmitWaitGet(t *testing.T) {
	t.Parallel()
	f := fleet(t, sim.Model{})
	ctx := ctxFor(t)
	job, err := f.Client.Submit(ctx, f.Route, events.Submit{Model: "owner/model", IdempotencyKey: "render-1",
		Input: json.RawMessage(`{"prompt":"a lighthouse"}`), Metadata: map[string]string{"user": "u1"}})
	require.NoError(t, err)
	require.Equal(t, client.Job{Route: f.Route, ID: events.KeyID(f.Route, "render-1")}, job, "the id the contract derives")

	final, err := f.Client.Wait(ctx, job)
	require.NoError(t, err)
	require.Equal(t, state.Succeeded, final.State)
	require.NotEmpty(t, final.Job.Outputs)
	require.Equal(t, "u1", final.Job.Metadata["user"])

	var seqs []uint64
	for ev, err := range f.Client.Events(ctx, job) {
		require.NoError(t, err)
		seqs = append(seqs, ev.Seq)
	}
	require.Equal(t, final.Seq, seqs[len(seqs)-1], "the sequence ends at the terminal event")
	for i, s := range seqs {
		require.Equal(t, uint64(i+1), s, "in order, none missing")
	}

	j, err := f.Client.Get(ctx, job.ID)
	require.NoError(t, err)
	require.Equal(t, state.Succeeded, j.State)
	require.NotEmpty(t, j.RemoteID)

	// Submitting again with the same key is the same job.
	again, err := f.Client.Submit(ctx, f.Route, events.Submit{Model: "owner/model", IdempotencyKey: "render-1"})
	require.NoError(t, err)
	require.Equal(t, job, again)
	require.Eventually(t, func() bool { return f.Sim.Stats().IdempotencyKeys == 1 }, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, 1, f.Sim.Stats().MaxCreatesPerKey, "created once at the provider")
}

// A running job is canceled: its last event says so, and the provider was
// asked to stop it.
func TestCancel(t *testing.T) {
	t.Parallel()
	f := fleet(t, sim.Model{RunMedian: sim.Duration(time.Hour)})
	ctx := ctxFor(t)
	job, err := f.Client.Submit(ctx, f.Route, events.Submit{Model: "owner/model", IdempotencyKey: "long"})
	require.NoError(t, err)
	for ev, err := range f.Client.Events(ctx, job) {
		require.NoError(t, err)
		if ev.Type == events.EventSubmitted {
			break // the provider has it
		}
	}
	require.NoError(t, f.Client.Cancel(ctx, job, "not needed any more"))
	final, err := f.Client.Wait(ctx, job)
	require.NoError(t, err)
	require.Equal(t, state.Canceled, final.State)
	require.Eventually(t, func() bool { return f.Sim.Stats().CancelCalls > 0 }, 10*time.Second, 50*time.Millisecond)
}

// What the client sends is checked before it is sent; what Pollux refuses
// later (a route it does not serve) comes back as a *RejectedError; a job
// never submitted is not found.
func TestErrors(t *testing.T) {
	t.Parallel()
	f := fleet(t, sim.Model{})
	ctx := ctxFor(t)
	_, err := f.Client.Submit(ctx, f.Route, events.Submit{IdempotencyKey: "no-model"})
	var fe *events.FieldError
	require.ErrorAs(t, err, &fe, "checked before it is sent")
	require.Equal(t, "model", fe.Field)

	job, err := f.Client.Submit(ctx, "nosuchroute", events.Submit{Model: "owner/model", IdempotencyKey: "typo"})
	require.NoError(t, err, "stored: the intake takes any route")
	_, err = f.Client.Wait(ctx, job)
	var rej *client.RejectedError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, events.KindSubmit, rej.Rejection.Kind)
	require.Contains(t, err.Error(), `no route named "nosuchroute"`)

	_, err = f.Client.Get(ctx, events.KeyID(f.Route, "never"))
	require.True(t, errors.Is(err, client.ErrNotFound), "%v", err)
	_, err = f.Client.Get(ctx, "bad id!")
	require.ErrorContains(t, err, "not a valid job id")
}
