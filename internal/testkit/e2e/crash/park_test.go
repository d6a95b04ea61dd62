package crash_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/events"
)

// parkingFleet is a fleet of real processes (ingest, two pollers,
// webhook) in real time, against a simulated provider whose jobs run
// about 45 s and are polled 20-25 s apart: with park_after 15s every wait
// parks its check. A third of the webhooks never come.
type parkingFleet struct {
	*creatingFleet
	pollers []*e2etest.Proc
	launch  func(name string) *e2etest.Proc
}

func startParkingFleet(t *testing.T, js jetstream.JetStream, svcURL func(service string) string, replicas int) *parkingFleet {
	t.Helper()
	f := e2etest.StartSimFleet(t, e2etest.SimFleetConfig{
		Token: "park-token",
		NATS:  svcURL,
		JS:    js,
		Sim: `
seed: 61
latency: 5ms
default: {queue_median: 1s, queue_sigma: 0.3, run_median: 45s, run_sigma: 0.3, fail_rate: 0.05}
faults: {webhook_missing_rate: 0.3}
`,
		Config: fmt.Sprintf(`
streams: {replicas: %d, park_after: 15s, check_ack_wait: 4s, intake_ack_wait: 6s}
routes:
  sim:
    kind: replicate
    base_url: http://{{sim}}
    token_env: SIM_TOKEN
    webhook_url: http://{{webhook}}/webhooks/sim
    call_timeout: 5s
    workers: {submit: 8, status: 16}
    poll: {min_delay: 20s, max_delay: 25s}
    options: {idempotent: true}
`, replicas),
	})
	n := 0
	launch := func(name string) *e2etest.Proc {
		service := name
		if strings.HasPrefix(name, "poller") {
			service = "poller"
		}
		n++
		return f.Launch(fmt.Sprintf("%s-%d", name, n), service)
	}
	launch("ingest")
	launch("webhook")
	return &parkingFleet{
		creatingFleet: &creatingFleet{t: t, js: js, log: e2etest.FollowFleet(t, js), simURL: f.SimURL, key: "park", model: "park/model"},
		pollers:       []*e2etest.Proc{launch("poller-a"), launch("poller-b")},
		launch:        launch,
	}
}

// parked counts the parked checks.
func (f *parkingFleet) parked() int {
	s, err := f.js.Stream(context.Background(), events.Default.ChecksStream())
	if err != nil {
		return 0
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(events.Default.AllParked()))
	if err != nil {
		return 0
	}
	return len(info.State.Subjects)
}

// check is creatingFleet.check (every job ended once, created once, none
// lost), and no check left, parked or not.
func (f *parkingFleet) check(timeout time.Duration) {
	f.t.Helper()
	f.creatingFleet.check(timeout)
	s, err := f.js.Stream(context.Background(), events.Default.ChecksStream())
	require.NoError(f.t, err)
	e2etest.WaitFor(f.t, "no check left, parked or not", 30*time.Second, func() bool {
		info, err := s.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
}

// TestChaosParkedChecks parks every job's check between its polls (real
// binaries, real time) and kills what holds them while they wait: the
// nats-server itself (SIGKILL, down past the checks' fire times) and a
// poller; on deploy/nats/cluster, the checks stream's leader. Every job
// must end once, polled and not lost, created once, with no check left and
// (on the cluster, each service its own user) no permission refused.
func TestChaosParkedChecks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	t.Run("server SIGKILL", func(t *testing.T) {
		t.Parallel()
		bin := e2etest.Binaries(t)
		dir := t.TempDir()
		node, url, js := e2etest.StoppableNATS(t, bin, dir)
		f := startParkingFleet(t, js, func(string) string { return url }, 1)
		n := e2etest.Size(60, 600)
		f.submit(n)
		e2etest.WaitFor(t, "checks parked", time.Minute, func() bool { return f.parked() >= n/2 })
		t.Logf("%d checks parked when the server is killed", f.parked())
		// A create answered while the server is down is recorded once it
		// is back, its redelivered submission waiting for the handling
		// that holds the answer: no create is sent twice (checked below).
		node.Restart(syscall.SIGKILL, 20*time.Second)
		f.pollers[0].Kill(t)
		f.launch("poller-c")
		f.check(4 * time.Minute)
	})
	t.Run("cluster leader SIGKILL", func(t *testing.T) {
		t.Parallel()
		bin := e2etest.Binaries(t)
		dir := t.TempDir()
		c := e2etest.StartShippedCluster(t, bin, dir)
		js := c.Connect(t)
		f := startParkingFleet(t, js, c.URLsAs, 3)
		n := e2etest.Size(60, 600)
		f.submit(n)
		e2etest.WaitFor(t, "checks parked", time.Minute, func() bool { return f.parked() >= n/2 })
		leader := e2etest.StreamLeader(t, js, events.Default.ChecksStream())
		node, ok := c.Nodes[leader]
		require.True(t, ok, "the checks stream's leader %q is one of the nodes", leader)
		t.Logf("%d checks parked when %s, the checks stream's leader, is killed", f.parked(), leader)
		node.Stop(syscall.SIGKILL)
		<-time.After(15 * time.Second) // one node down while checks fire
		node.Start()
		f.check(4 * time.Minute)
		for _, node := range c.Nodes {
			require.Empty(t, node.Violations(), "%s: every service's traffic is allowed by deploy/nats/accounts.conf", node.Name)
		}
	})
}
