package state_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/state"
)

func TestTransition(t *testing.T) {
	t.Parallel()
	tests := []struct {
		from, to state.State
		want     error
	}{
		{state.Pending, state.Queued, nil},
		{state.Pending, state.Succeeded, nil},
		{state.Queued, state.Queued, nil},
		{state.Queued, state.Running, nil},
		{state.Running, state.Running, nil},
		{state.Running, state.Failed, nil},
		{state.Running, state.Queued, state.ErrRegress},
		{state.Queued, state.Pending, state.ErrRegress},
		{state.Succeeded, state.Running, state.ErrTerminal},
		{state.Succeeded, state.Failed, state.ErrTerminal},
		{state.Expired, state.Succeeded, state.ErrTerminal},
		{state.Lost, state.Lost, state.ErrTerminal},
		{state.Running, state.Unknown, state.ErrInvalidState},
		{"bogus", state.Running, state.ErrInvalidState},
	}
	for _, tt := range tests {
		t.Run(string(tt.from)+"→"+string(tt.to), func(t *testing.T) {
			err := state.Transition(tt.from, tt.to)
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestApply(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name   string
		start  state.State
		obs    state.Observation
		event  string
		expect func(*testing.T, *state.Job)
	}{
		{
			name: "queued to running records running", start: state.Queued,
			obs:   state.Observation{State: state.Running, Raw: "processing", At: at(5), Source: state.FromPoll},
			event: "running",
			expect: func(t *testing.T, j *state.Job) {
				require.Equal(t, state.Running, j.State)
				require.Equal(t, "processing", j.ProviderStatus)
				require.Equal(t, at(5), j.StartedAt, "started at detection when the provider gives no time")
				require.Equal(t, at(5), j.ChangedAt)
			},
		},
		{
			name: "terminal records completion and detection", start: state.Running,
			obs: state.Observation{
				State: state.Succeeded, Raw: "succeeded", At: at(10), CompletedAt: at(8),
				Source: state.FromWebhook, Outputs: []string{"https://x/y.mp4"}, OutputsExpireAt: at(3608),
			},
			event: "succeeded",
			expect: func(t *testing.T, j *state.Job) {
				require.Equal(t, at(8), j.CompletedAt)
				require.Equal(t, at(10), j.DetectedAt)
				require.Equal(t, state.FromWebhook, j.DetectedBy)
				require.Equal(t, []string{"https://x/y.mp4"}, j.Outputs)
				require.Equal(t, at(3608), j.OutputsExpireAt, "when the provider deletes them")
				require.Nil(t, j.Input, "input dropped once terminal")
				require.InDelta(t, 1.0, *j.Progress, 0)
			},
		},
		{
			name: "failure keeps the reason", start: state.Queued,
			obs:   state.Observation{State: state.Failed, Raw: "failed", Reason: "NSFW", At: at(3)},
			event: "failed",
			expect: func(t *testing.T, j *state.Job) {
				require.Equal(t, "NSFW", j.Reason)
				require.Equal(t, at(3), j.CompletedAt, "completion falls back to detection")
			},
		},
		{
			name: "running after succeeded is ignored", start: state.Succeeded,
			obs:   state.Observation{State: state.Running, Raw: "processing", At: at(20)},
			event: "",
			expect: func(t *testing.T, j *state.Job) {
				require.Equal(t, state.Succeeded, j.State)
				require.Nil(t, j.Late)
			},
		},
		{
			name: "late success after expiry is recorded, not applied", start: state.Expired,
			obs:   state.Observation{State: state.Succeeded, Raw: "succeeded", At: at(30), Source: state.FromWebhook},
			event: "",
			expect: func(t *testing.T, j *state.Job) {
				require.Equal(t, state.Expired, j.State)
				require.NotNil(t, j.Late)
				require.Equal(t, state.Succeeded, j.Late.State)
			},
		},
		{
			name: "queued after running is ignored", start: state.Running,
			obs:   state.Observation{State: state.Queued, Raw: "starting", At: at(4)},
			event: "",
			expect: func(t *testing.T, j *state.Job) {
				require.Equal(t, state.Running, j.State)
				require.Empty(t, j.ProviderStatus, "a regressing observation changes nothing")
			},
		},
		{
			name: "unmapped value updates only the raw status", start: state.Running,
			obs:   state.Observation{State: state.Unknown, Raw: "mystery", At: at(4)},
			event: "",
			expect: func(t *testing.T, j *state.Job) {
				require.Equal(t, state.Running, j.State)
				require.Equal(t, "mystery", j.ProviderStatus)
			},
		},
		{
			name: "progress records a progress event", start: state.Running,
			obs:   state.Observation{State: state.Running, Progress: ptr(0.4), At: at(6)},
			event: state.EventProgress,
			expect: func(t *testing.T, j *state.Job) {
				require.InDelta(t, 0.4, *j.Progress, 1e-9)
				require.Equal(t, at(6), j.ChangedAt)
			},
		},
		{
			name: "queue position change is progress", start: state.Queued,
			obs:   state.Observation{State: state.Queued, QueuePosition: ptr(3), At: at(6)},
			event: state.EventProgress,
		},
		{
			name: "a cancel nobody asked for at the deadline is expiry", start: state.Running,
			obs:   state.Observation{State: state.Canceled, Raw: "canceled", At: at(61), CompletedAt: at(59)},
			event: "expired",
			expect: func(t *testing.T, j *state.Job) {
				require.Equal(t, state.Expired, j.State)
				require.Contains(t, j.Reason, "deadline")
			},
		},
		{
			name: "same state without news records nothing", start: state.Queued,
			obs:   state.Observation{State: state.Queued, Raw: "starting", At: at(6)},
			event: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &state.Job{ID: "j1", State: tt.start, RemoteID: "rem-1", Input: []byte(`{}`), Deadline: at(60)}
			seq := j.EventSeq
			require.Equal(t, tt.event, j.Apply(tt.obs))
			if tt.event == "" {
				require.Empty(t, j.Outbox)
				require.Equal(t, seq, j.EventSeq)
			} else {
				require.Len(t, j.Outbox, 1)
				require.Equal(t, tt.event, j.Outbox[0].Type)
				require.Equal(t, seq+1, j.Outbox[0].Seq)
			}
			if tt.expect != nil {
				tt.expect(t, j)
			}
		})
	}
}

func TestApplyCancelBeforeDeadlineOrRequested(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	early := &state.Job{ID: "j", State: state.Running, Deadline: deadline}
	require.Equal(t, "canceled", early.Apply(state.Observation{State: state.Canceled, At: deadline.Add(-time.Minute)}))

	asked := &state.Job{ID: "j", State: state.Running, Deadline: deadline, CancelRequestedAt: deadline.Add(-time.Second)}
	require.Equal(t, "canceled", asked.Apply(state.Observation{State: state.Canceled, At: deadline.Add(time.Second)}))
}

func TestApplyProgressBelowStepIsNoNews(t *testing.T) {
	t.Parallel()
	j := &state.Job{ID: "j1", State: state.Running, Progress: ptr(0.5)}
	require.Empty(t, j.Apply(state.Observation{State: state.Running, Progress: ptr(0.505)}))
	require.Equal(t, state.EventProgress, j.Apply(state.Observation{State: state.Running, Progress: ptr(0.52)}))
}

func TestOutboxPublished(t *testing.T) {
	t.Parallel()
	j := &state.Job{ID: "j1", State: state.Pending}
	j.Record("submitted", time.Now())
	j.Record("running", time.Now())
	j.Record("succeeded", time.Now())
	require.Equal(t, uint64(3), j.EventSeq)
	require.True(t, j.Published(2))
	require.Len(t, j.Outbox, 1)
	require.Equal(t, uint64(3), j.Outbox[0].Seq)
	require.False(t, j.Published(2), "already removed")
	require.True(t, j.Published(3))
	require.Nil(t, j.Outbox)
}

func TestDurationJSON(t *testing.T) {
	t.Parallel()
	d := state.Duration(1500 * time.Millisecond)
	b, err := d.MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, "1.5", string(b))
	var back state.Duration
	require.NoError(t, back.UnmarshalJSON(b))
	require.Equal(t, d, back)
}

func TestDeliveredOnce(t *testing.T) {
	t.Parallel()
	j := &state.Job{ID: "j"}
	require.True(t, j.Delivered("d1"))
	require.False(t, j.Delivered("d1"))
	for i := range state.MaxDeliveries {
		require.True(t, j.Delivered(fmt.Sprintf("x%d", i)))
	}
	require.Len(t, j.Deliveries, state.MaxDeliveries, "bounded")
	require.Equal(t, 1+state.MaxDeliveries, j.Webhooks)
}

// A job the provider never had keeps its input when it ends, for a
// resubmission; one the provider had drops it.
func TestApplyKeepsTheInputOfAJobTheProviderNeverHad(t *testing.T) {
	t.Parallel()
	j := &state.Job{ID: "j1", State: state.Pending, Input: []byte(`{"p":1}`)}
	j.Apply(state.Observation{State: state.Lost, Reason: "in doubt", At: time.Now(), Source: state.FromPollux})
	require.JSONEq(t, `{"p":1}`, string(j.Input))
	j = &state.Job{ID: "j2", State: state.Running, RemoteID: "rem", Input: []byte(`{"p":1}`)}
	j.Apply(state.Observation{State: state.Failed, At: time.Now(), Source: state.FromPoll})
	require.Nil(t, j.Input)
	// A route that keeps inputs (keep_inputs) keeps it at the end too.
	j = &state.Job{ID: "j3", State: state.Running, RemoteID: "rem", Input: []byte(`{"p":1}`), KeepInput: true}
	j.Apply(state.Observation{State: state.Failed, At: time.Now(), Source: state.FromPoll})
	require.JSONEq(t, `{"p":1}`, string(j.Input))
}
