package events_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// A check carries its job's poll state and nothing a poll does not read;
// a poll state that does not fit its check is refused with the field
// named.
func TestCheckRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 15, 4, 5, 0, time.UTC)
	p := 0.5
	j := &state.Job{ID: "job-1", Route: "rep", Model: "m", RemoteID: "r-1", State: state.Running, ProviderStatus: "processing",
		Progress: &p, CreatedAt: at, SubmittedAt: at, Deadline: at.Add(time.Hour), Polls: 4, Unchanged: 2, Refused: 1,
		WebhookExpected: true, Input: []byte(`{"prompt":"x"}`), Metadata: map[string]string{"user": "u"}, Outputs: []string{"https://x/y"}}
	ps := events.PollStateOf(j)
	ps.Published = 3
	b, err := json.Marshal(events.Check{V: events.Version, JobID: "job-1", Due: at.Add(time.Minute), Poll: ps})
	require.NoError(t, err)
	require.NotContains(t, string(b), "prompt", "the submission stays in the record")
	require.NotContains(t, string(b), "https://x/y", "so do the outputs")
	c, err := events.DecodeCheck(b)
	require.NoError(t, err)
	require.Equal(t, "job-1", c.JobID)
	require.Equal(t, at.Add(time.Minute), c.Due)
	require.Equal(t, ps, c.Poll)
	require.Equal(t, 4, c.Poll.Polls)
	require.True(t, c.Poll.Webhook)
	require.InDelta(t, 0.5, *c.Poll.Progress, 0)

	// The state machine's view and back: what it applies is taken back.
	pj := c.Poll.Job("job-1", "rep")
	require.Equal(t, "r-1", pj.RemoteID)
	require.Equal(t, 4, pj.Polls)
	pj.Apply(state.Observation{State: state.Succeeded, Raw: "succeeded", At: at.Add(2 * time.Minute)})
	c.Poll.Learned(pj)
	require.Equal(t, state.Succeeded, c.Poll.State)
	require.Equal(t, "succeeded", c.Poll.Raw)

	for name, tc := range map[string]struct{ data, field string }{
		"bad id":       {`{"v":1,"job_id":"a.b"}`, "job_id"},
		"bad state":    {`{"v":1,"job_id":"a","poll":{"state":"done","remote_id":"r"}}`, "poll.state"},
		"no remote id": {`{"v":1,"job_id":"a","poll":{"state":"running"}}`, "poll.remote_id"},
		"negative":     {`{"v":1,"job_id":"a","poll":{"state":"running","remote_id":"r","polls":-1}}`, "poll"},
		"no version":   {`{"job_id":"a"}`, "v"},
		"not json":     {`{"v":1,`, ""},
		"too big":      {`{"v":1,"job_id":"a","pad":"` + strings.Repeat("x", events.MaxCheckBytes) + `"}`, ""},
	} {
		_, err := events.DecodeCheck([]byte(tc.data))
		var fe *events.FieldError
		require.True(t, errors.As(err, &fe), "%s: %v", name, err)
		require.Equal(t, tc.field, fe.Field, name)
	}
}

// A check published before poll states (a partial job record under "job",
// its due time under "not_before") decodes without poll state, so the
// poller reads the record for it; its due time is kept.
func TestCheckFromBeforePollStates(t *testing.T) {
	t.Parallel()
	c, err := events.DecodeCheck([]byte(`{"v":1,"job_id":"a","not_before":"2026-11-29T15:04:05Z",` +
		`"job":{"id":"a","state":"running","remote_id":"r","polls":3}}`))
	require.NoError(t, err)
	require.Nil(t, c.Poll)
	require.Equal(t, time.Date(2026, 11, 29, 15, 4, 5, 0, time.UTC), c.Due)
}

func FuzzDecodeCheck(f *testing.F) {
	f.Add([]byte(`{"v":1,"job_id":"a","due":"2026-11-29T15:04:05Z","poll":{"state":"running","remote_id":"r","polls":3}}`))
	f.Add([]byte(`{"v":1,"job_id":"a","job":{"id":"a"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := events.DecodeCheck(data)
		if err != nil {
			var fe *events.FieldError
			require.True(t, errors.As(err, &fe), "every refusal names its field: %v", err)
			return
		}
		require.True(t, events.ValidToken(c.JobID))
		if c.Poll != nil {
			require.NotEmpty(t, c.Poll.RemoteID)
			require.True(t, c.Poll.State.Valid())
		}
	})
}
