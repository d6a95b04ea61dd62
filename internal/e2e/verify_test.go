package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/dev"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// outcome is what a fault scenario ends with, for its report line.
type outcome struct {
	jobs, faults, lost int
	worstDelay         time.Duration
	states             map[state.State]int
}

func (o outcome) String() string {
	return fmt.Sprintf("jobs %d · faults injected %d · jobs lost %d · worst detection delay %s · %v",
		o.jobs, o.faults, o.lost, o.worstDelay.Round(time.Millisecond), o.states)
}

// verify makes the checks every fault scenario ends with, against the
// simulator's ground truth and the KV: every job terminal exactly once, in
// a state that agrees with what the provider knows (expired only for jobs
// that would never finish; want, when it names a job, fixes its state);
// at most one remote job per idempotency key; events numbered 1..n in
// stream order per job; nothing left unpublished; no check message left.
func verify(t *testing.T, e *env, ids []string, want map[string]state.State, truth []sim.Prediction, st sim.Stats) outcome {
	t.Helper()
	ctx := context.Background()
	byKey := map[string][]sim.Prediction{}
	for _, p := range truth {
		byKey[p.IdempotencyKey] = append(byKey[p.IdempotencyKey], p)
	}
	out := outcome{jobs: len(ids), states: map[state.State]int{},
		faults: st.RateLimited + st.ServerErrors + st.NotFound + st.Hangs + st.Malformed + st.Regressed +
			st.WebhooksMissing + st.WebhooksDuplicated + st.WebhooksLate}
	terminal := e.log.terminal()
	all := e.log.jobs()
	for _, id := range ids {
		evs := terminal[id]
		if !assertLen(t, evs, 1, "job %s: exactly one terminal event", id) {
			out.lost++
			continue
		}
		got := evs[0].State
		out.states[got]++
		j, _, err := e.Env.Life.Store().Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, got, j.State, "job %s: record and event agree", id)
		require.Empty(t, j.Outbox, "job %s: nothing left unpublished", id)
		if w, ok := want[id]; ok {
			require.Equal(t, w, got, "job %s", id)
		}
		for i, ev := range all[id] {
			require.Equal(t, uint64(i+1), ev.Seq, "job %s: events numbered 1.. in stream order", id)
		}
		ps := byKey[j.IdempotencyKey]
		require.LessOrEqual(t, len(ps), 1, "job %s: one remote job per idempotency key", id)
		if len(ps) == 0 {
			require.Contains(t, []state.State{state.Lost, state.Failed, state.Canceled}, got, "job %s was never created", id)
			continue
		}
		p := ps[0]
		require.Equal(t, p.ID, j.RemoteID, "job %s", id)
		switch got {
		case state.Succeeded, state.Failed:
			require.Equal(t, string(got), p.Status, "job %s: Pollux says %s", id, got)
		case state.Canceled:
			require.Contains(t, []string{"canceled", "aborted"}, p.Status, "job %s", id)
		case state.Lost:
			require.True(t, p.Lost || j.SubmitInDoubt || j.NotFound > 0, "job %s lost but the provider has it", id)
		case state.Expired:
			require.True(t, p.NeverFinish || j.Deadline.Before(time.Now()), "job %s expired", id)
		}
		if (got == state.Succeeded || got == state.Failed) && !j.CompletedAt.IsZero() {
			out.worstDelay = max(out.worstDelay, j.DetectedAt.Sub(j.CompletedAt))
		}
	}
	waitFor(t, "no check message left", 60*time.Second, func() bool { return e.streamMsgs(t, e.Env.Res.Checks) == 0 })
	require.Zero(t, out.lost, "jobs lost")
	return out
}

func assertLen(t *testing.T, evs []*events.Event, n int, msg string, args ...any) bool {
	t.Helper()
	if len(evs) != n {
		t.Errorf(msg+": got %d", append(args, len(evs))...)
		return false
	}
	return true
}

var _ = dev.RouteName
