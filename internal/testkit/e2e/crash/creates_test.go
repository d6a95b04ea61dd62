package crash_test

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// creatingFleet is a fleet of real processes (ingest, poller, webhook)
// against the simulated provider, whose creates are answered slowly so
// that many are in flight at any moment.
type creatingFleet struct {
	t      *testing.T
	js     jetstream.JetStream
	log    *e2etest.EventLog
	simURL string
	ids    []string
	// key prefixes the submissions' idempotency keys; model is theirs.
	key, model string
}

// startCreatingFleet runs the fleet on the NATS servers js reaches;
// svcURL gives each service its URL (its user, for a server with
// accounts).
func startCreatingFleet(t *testing.T, js jetstream.JetStream, svcURL func(service string) string,
	replicas int, idempotent bool) *creatingFleet {
	t.Helper()
	return startCreatingFleetWith(t, js, svcURL, creating{replicas: replicas, idempotent: idempotent, ingests: 1, intakeAckWait: time.Minute})
}

// creating shapes a creating fleet: its streams' replicas, whether its
// provider deduplicates keys, how many ingest processes it runs and how
// long an intake message waits for its ack.
type creating struct {
	replicas      int
	idempotent    bool
	ingests       int
	intakeAckWait time.Duration
}

func startCreatingFleetWith(t *testing.T, js jetstream.JetStream, svcURL func(service string) string, c creating) *creatingFleet {
	t.Helper()
	replicas, idempotent := c.replicas, c.idempotent
	f := e2etest.StartSimFleet(t, e2etest.SimFleetConfig{
		Token:     "create-token",
		TimeScale: 50,
		NATS:      svcURL,
		JS:        js,
		Sim: fmt.Sprintf(`
time_scale: 50
seed: 51
latency: 5ms
create_delay: 150ms
default: {queue_median: 2s, queue_sigma: 0.3, run_median: 30s, run_sigma: 0.3, fail_rate: 0.05}
faults: {webhook_missing_rate: 0.3, not_idempotent: %v}
`, !idempotent),
		Config: fmt.Sprintf(`
streams: {replicas: %d, intake_ack_wait: %s}
routes:
  sim:
    kind: replicate
    base_url: http://{{sim}}
    token_env: SIM_TOKEN
    webhook_url: http://{{webhook}}/webhooks/sim
    call_timeout: 5s
    workers: {submit: 8, status: 16}
    options: {idempotent: %v}
`, replicas, c.intakeAckWait, idempotent),
	})
	for i := range c.ingests {
		f.Launch(fmt.Sprintf("ingest-%d", i+1), "ingest")
	}
	for _, name := range []string{"poller", "webhook"} {
		f.Launch(name, name)
	}
	return &creatingFleet{t: t, js: js, log: e2etest.FollowFleet(t, js), simURL: f.SimURL, key: "create", model: "create/model"}
}

// submit publishes n submissions, retrying while the servers elect.
func (f *creatingFleet) submit(n int) {
	f.t.Helper()
	for i := range n {
		key := fmt.Sprintf("%s-%05d", f.key, i)
		f.ids = append(f.ids, events.KeyID("sim", key))
		msg, err := json.Marshal(events.Submit{V: 1, IdempotencyKey: key, Model: f.model, Input: json.RawMessage(`{}`)})
		require.NoError(f.t, err)
		require.Eventually(f.t, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err = f.js.Publish(ctx, events.Default.Submit("sim"), msg)
			return err == nil
		}, time.Minute, 100*time.Millisecond, "publish submission %d: %v", i, err)
	}
}

// whenCreating waits until the provider has created some of the jobs but
// not all: creates are in flight.
func (f *creatingFleet) whenCreating(some int) {
	f.t.Helper()
	e2etest.WaitFor(f.t, "creates under way", time.Minute, func() bool { return e2etest.SimStats(f.t, f.simURL).Creates >= some })
	require.Less(f.t, e2etest.SimStats(f.t, f.simURL).Creates, len(f.ids), "creates still in flight when the fault strikes")
}

// check waits for every job and checks the provider's ground truth: one
// create per job, no job lost that the provider has, one terminal event
// each.
func (f *creatingFleet) check(timeout time.Duration) sim.Stats {
	f.t.Helper()
	e2etest.WaitTerminal(f.t, f.js, f.log, f.ids, timeout)
	st := e2etest.SimStats(f.t, f.simURL)
	require.Zero(f.t, st.DuplicateCreates, "no job sent to the provider twice")
	require.Equal(f.t, len(f.ids), st.Creates, "every job created once")
	terminal := f.log.Terminal()
	for _, id := range f.ids {
		evs := terminal[id]
		require.Len(f.t, evs, 1, "job %s: one terminal event", id)
		require.NotEqual(f.t, state.Lost, evs[0].State, "job %s: lost, though the provider has it (%s)", id, evs[0].Job.Reason)
		require.NotEmpty(f.t, evs[0].Job.RemoteID, "job %s: its remote id recorded", id)
	}
	return st
}

// TestChaosNATSRestartDuringCreates stops the nats-server (SIGTERM) while
// ingest is creating jobs, keeps it down for five seconds and starts it
// again on the same store: ingest has the provider's answers in hand for
// the creates under way, and must record them once NATS is back — no job
// lost that the provider has, none created twice, whether the provider
// deduplicates or not.
func TestChaosNATSRestartDuringCreates(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	for _, idempotent := range []bool{true, false} {
		t.Run(fmt.Sprintf("idempotent=%v", idempotent), func(t *testing.T) {
			t.Parallel()
			bin := e2etest.Binaries(t)
			dir := t.TempDir()
			node, url, js := e2etest.StoppableNATS(t, bin, dir)
			f := startCreatingFleet(t, js, func(string) string { return url }, 1, idempotent)
			n := e2etest.Size(150, 1500)
			f.submit(n)
			f.whenCreating(n / 5)
			node.Restart(syscall.SIGTERM, 5*time.Second)
			st := f.check(3 * time.Minute)
			t.Logf("FAULTS %-28s jobs %d · creates %d · duplicate creates %d", fmt.Sprintf("NATS restart mid-create (idempotent=%v)", idempotent),
				n, st.Creates, st.DuplicateCreates)
		})
	}
}

// TestChaosLongNATSOutageDuringCreates keeps the nats-server down (SIGKILL)
// for longer than the intake's ack wait and the creates' call timeout with
// margin, while two ingest processes create jobs at a provider that can
// neither be asked for a job nor deduplicates a retry: the answers the
// processes held through the outage are recorded once NATS is back, and
// the submissions redelivered meanwhile — to the process holding the
// answer or to the other — wait for them instead of giving the jobs up.
// Nothing lost that the provider has, nothing created twice. make chaos
// runs it (POLLUX_CHAOS=long): the rules it checks are guarded in make
// test by ingest's own tests, and its 15 s outage beside the other suites
// loads a two-core machine for little.
func TestChaosLongNATSOutageDuringCreates(t *testing.T) {
	if testing.Short() || !e2etest.Long() {
		t.Skip("make chaos runs it (POLLUX_CHAOS=long)")
	}
	t.Parallel()
	bin := e2etest.Binaries(t)
	dir := t.TempDir()
	node, url, js := e2etest.StoppableNATS(t, bin, dir)
	f := startCreatingFleetWith(t, js, func(string) string { return url }, creating{replicas: 1, ingests: 2, intakeAckWait: 3 * time.Second})
	n := e2etest.Size(150, 1500)
	f.submit(n)
	f.whenCreating(n / 5)
	node.Restart(syscall.SIGKILL, 15*time.Second) // past 3 s ack wait and 5 s + 5 s of a call in doubt
	st := f.check(3 * time.Minute)
	t.Logf("FAULTS %-28s jobs %d · creates %d · duplicate creates %d", "NATS down 15 s mid-create, 2 ingests", n, st.Creates, st.DuplicateCreates)
}

// TestChaosClusterLeaderKilledDuringCreates runs the fleet on the three
// nodes of deploy/nats/cluster (R3 everywhere, each service as its own
// user) and SIGKILLs the node leading the job bucket while creates are in
// flight, restarting it ten seconds later: one node down loses nothing.
func TestChaosClusterLeaderKilledDuringCreates(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	t.Parallel()
	bin := e2etest.Binaries(t)
	dir := t.TempDir()
	c := e2etest.StartShippedCluster(t, bin, dir)
	js := c.Connect(t)
	f := startCreatingFleet(t, js, c.URLsAs, 3, false)
	n := e2etest.Size(150, 1500)
	f.submit(n)
	f.whenCreating(n / 5)
	leader := e2etest.StreamLeader(t, js, "KV_"+events.Default.JobsBucket())
	node, ok := c.Nodes[leader]
	require.True(t, ok, "the job bucket's leader %q is one of the nodes", leader)
	node.Stop(syscall.SIGKILL)
	t.Logf("SIGKILLed %s, the job bucket's leader, with %d of %d jobs created", leader, e2etest.SimStats(t, f.simURL).Creates, n)
	<-time.After(10 * time.Second) // one node down
	node.Start()
	st := f.check(4 * time.Minute)
	for _, node := range c.Nodes {
		require.Empty(t, node.Violations(), "%s: every service's traffic is allowed by deploy/nats/accounts.conf", node.Name)
	}
	t.Logf("FAULTS %-28s jobs %d · creates %d · duplicate creates %d", "cluster leader SIGKILL mid-create", n, st.Creates, st.DuplicateCreates)
}
