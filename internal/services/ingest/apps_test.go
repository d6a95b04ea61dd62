package ingest_test

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/jobs"
	"github.com/pollux-dev/pollux/internal/core/route"
	"github.com/pollux-dev/pollux/internal/core/route/budget"
	"github.com/pollux-dev/pollux/internal/core/spend"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/services/ingest"
	"github.com/pollux-dev/pollux/internal/testkit/stack"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/state"
)

// An app's caps over NATS, on a route that caps nothing of its own
// (anvil: one running, one waiting): its second job waits for its app's
// running slot, its third is rejected naming the app's max_waiting as
// fields, another app's job is created meanwhile (the queue goes on past
// a full app), and the waiting job starts once the first ends.
func TestAnAppsCapsOverNATS(t *testing.T) {
	t.Parallel()
	p := &turnover{fake: newFake(), created: make(chan string, 100)}
	st := stack.One(t, "fake", p, config.Route{Workers: config.Workers{Submit: 4}})
	apps := budget.NewApps(st.JS, st.NS, st.Options, map[string]budget.AppCap{"anvil": {Running: 1, Waiting: 1}})
	svc, err := ingest.New(ingest.Config{Routes: st.Routes, Options: st.Options, RepairInterval: time.Second, Spend: spend.New(spend.Config{Apps: apps}, st.Res.Spend)},
		st.JS, st.NS, st.Res, st.Jobs.Intake(), st.Gates(route.GateConfig{CallTimeout: time.Second, Apps: apps}))
	require.NoError(t, err)
	st.Go(svc.Run)
	s := &rig{Stack: st, t: t, repaired: new(atomic.Int64)}
	submit := func(id, app string) {
		s.Publish(s.NS.Submit("fake"), events.Submit{V: events.Version, ID: id, Model: "m", Input: json.RawMessage(`{}`), App: app})
	}
	created := func() string {
		select {
		case id := <-p.created:
			return id
		case <-time.After(20 * time.Second):
			t.Fatal("no job created")
			return ""
		}
	}

	submit("a", "anvil")
	require.Equal(t, "a", created())
	submit("b", "anvil")
	require.Equal(t, "app anvil", s.Until("b", func(j *state.Job) bool { return j.WaitingFor != "" }).WaitingFor)
	submit("c", "anvil")
	rej := s.rejection("fake", "c").Rejection
	require.Equal(t, "app", rej.Field)
	require.Equal(t, "anvil", rej.App)
	require.Equal(t, &events.RejectedBudget{Of: "app anvil", Period: events.PeriodWaiting, Budget: 1, Spent: 1}, rej.Budget)
	submit("x", "rival")
	require.Equal(t, "x", created(), "another app's job goes past anvil's waiting one")

	rec, err := s.Jobs.Intake().Read(s.Ctx(), "a")
	require.NoError(t, err)
	_, err = s.Jobs.Intake().End(s.Ctx(), rec, state.Observation{State: state.Succeeded, Raw: "succeeded", Source: state.FromPoll, At: time.Now()}, jobs.Always)
	require.NoError(t, err)
	require.Equal(t, "b", created(), "a ended: anvil's running slot is b's")
	s.nothingRepaired()
}
