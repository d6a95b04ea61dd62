package faces_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/state"
)

// requireProviderPollsArePolluxs waits until every job of ids has ended
// and its polls are counted, then holds the simulated provider to what
// Pollux alone asked of it: its status calls are the records' polls,
// however often the apps polled (clientPolls, -1 when the apps did not
// count theirs), and each job was created once.
func requireProviderPollsArePolluxs(t *testing.T, s *stack, name string, ids []string, clientPolls int) {
	t.Helper()
	var polls int
	var open []*state.Job // the jobs whose polls are not counted yet
	ended := e2etest.Eventually(func() bool {
		polls, open = 0, nil
		for _, id := range ids {
			j := s.lookup(t, id)
			switch {
			case j == nil:
				open = append(open, &state.Job{ID: id})
			case !j.State.Terminal() || j.PollsOpen:
				open = append(open, j)
			default:
				polls += j.Polls
			}
		}
		return len(open) == 0
	}, 60*time.Second)
	if !ended {
		for _, j := range open {
			t.Logf("not ended, or its polls not counted: %+v", *j)
		}
		t.Fatalf("%d jobs have not ended, or their polls are not counted", len(open))
	}
	st := s.SimStats(t)
	t.Logf("%s face: %d jobs, provider status calls %d, records' polls %d, the apps' polls %d, creates sent again with their key %d",
		name, len(ids), st.StatusCalls, polls, clientPolls, st.DuplicateCreates)
	require.Equal(t, polls, st.StatusCalls, "the provider saw Pollux's polls, not the apps'")
	require.Equal(t, len(ids), st.Predictions, "one prediction per job")
}

// keyedAcrossKill runs script's MODE=keyed (n creates one after another,
// each with its Idempotency-Key, retried by the app) while the gateway is
// SIGKILLed and restarted once the third job exists; each key is one job,
// of the id idOf(i) makes. It returns the ids.
func keyedAcrossKill(t *testing.T, s *stack, script string, env []string, idOf func(key string) string) []string {
	t.Helper()
	const n, prefix = 12, "kill"
	out := make(chan []map[string]any, 1)
	go func() {
		var lines []map[string]any
		defer func() { out <- lines }() // also when node fails the test
		lines = node(t, script, 90*time.Second, append(env, "MODE=keyed", fmt.Sprintf("JOBS=%d", n), "KEY_PREFIX="+prefix)...)
	}()
	e2etest.WaitFor(t, "the third keyed job", 30*time.Second, func() bool { return s.lookup(t, idOf(prefix+"-2")) != nil })
	s.Ingest.Kill(t) // the app is creating the fourth
	s.StartIngest(t)
	lines := <-out
	require.Len(t, lines, n)
	var ids []string
	retried := 0
	for i, l := range lines {
		require.Equal(t, idOf(fmt.Sprintf("%s-%d", prefix, i)), l["id"], "the key makes the id")
		if l["tries"].(float64) > 1 {
			retried++
		}
		ids = append(ids, l["id"].(string))
	}
	t.Logf("%s: %d keyed creates across a gateway SIGKILL, %d retried by the app", script, n, retried)
	return ids
}

// errorsOf runs script's MODE=errors and returns each attempt's error by
// name; every attempt must fail.
func errorsOf(t *testing.T, script string, env []string) map[string]map[string]any {
	t.Helper()
	errs := map[string]map[string]any{}
	for _, l := range node(t, script, 60*time.Second, append(env, "MODE=errors")...) {
		e, _ := l["error"].(map[string]any)
		require.NotNil(t, e, "%v must fail", l["name"])
		errs[l["name"].(string)] = e
	}
	return errs
}
