package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
	"github.com/pollux-dev/pollux/pkg/state"
)

// natsNode is a nats-server process that a test can stop (SIGTERM or
// SIGKILL) and start again on the same port and store, as an operator or a
// crash would.
type natsNode struct {
	t    *testing.T
	name string
	bin  string
	env  []string
	args []string
	mu   sync.Mutex
	cur  *proc
	all  []*proc // every run, for their logs
	runs int
}

func startNode(t *testing.T, name, bin string, env []string, args ...string) *natsNode {
	t.Helper()
	n := &natsNode{t: t, name: name, bin: bin, env: env, args: args}
	n.start()
	return n
}

func (n *natsNode) start() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.runs++
	n.cur = launch(n.t, fmt.Sprintf("%s-%d", n.name, n.runs), n.env, n.bin, n.args...)
	n.all = append(n.all, n.cur)
}

// violations are the permission violations every run of the server logged.
func (n *natsNode) violations() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var seen []string
	for _, p := range n.all {
		seen = append(seen, violationLine.FindAllString(readLog(n.t, p), -1)...)
	}
	return seen
}

// violationLine is a server's log line about a permission violation.
var violationLine = regexp.MustCompile(`(?m)^.*Violation.*$`)

// stop stops the server with sig and waits for it to exit.
func (n *natsNode) stop(sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	require.NoError(n.t, n.cur.cmd.Process.Signal(sig))
	<-n.cur.done
}

// restart stops the server, keeps it down for down, and starts it again.
func (n *natsNode) restart(sig syscall.Signal, down time.Duration) {
	n.stop(sig)
	<-time.After(down)
	n.start()
}

// creatingFleet is a fleet of real processes (ingest, poller, webhook)
// against the simulated provider, whose creates are answered slowly so
// that many are in flight at any moment.
type creatingFleet struct {
	t      *testing.T
	js     jetstream.JetStream
	log    *eventLog
	simURL string
	ids    []string
}

// startCreatingFleet runs the fleet on the NATS servers at urls; svcURL
// gives each service its URL (its user, for a server with accounts).
func startCreatingFleet(t *testing.T, bin, dir string, js jetstream.JetStream, svcURL func(service string) string,
	replicas int, idempotent bool) *creatingFleet {
	t.Helper()
	tokenEnv := []string{"SIM_TOKEN=create-token"}
	_, simAddr := simProcess(t, bin, dir, "sim", fmt.Sprintf(`
time_scale: 50
seed: 51
latency: 5ms
create_delay: 150ms
default: {queue_median: 2s, queue_sigma: 0.3, run_median: 30s, run_sigma: 0.3, fail_rate: 0.05}
faults: {webhook_missing_rate: 0.3, not_idempotent: %v}
`, !idempotent), tokenEnv, "SIM_TOKEN")
	hookAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := filepath.Join(dir, "pollux.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`
streams: {replicas: %d}
routes:
  sim:
    kind: replicate
    base_url: http://%s
    token_env: SIM_TOKEN
    webhook_url: http://%s/webhooks/sim
    call_timeout: 5s
    workers: {submit: 8, status: 16}
    options: {idempotent: %v}
`, replicas, simAddr, hookAddr, idempotent)), 0o600))
	for _, name := range []string{"ingest", "poller", "webhook"} {
		launch(t, name, append(tokenEnv, "POLLUX_NATS_URL="+svcURL(name), "POLLUX_CONFIG="+cfg, "POLLUX_METRICS_ADDR=",
			"POLLUX_TIME_SCALE=50", "POLLUX_WEBHOOK_ADDR="+hookAddr), filepath.Join(bin, name))
	}
	return &creatingFleet{t: t, js: js, log: followFleet(t, js), simURL: "http://" + simAddr}
}

// submit publishes n submissions, retrying while the servers elect.
func (f *creatingFleet) submit(n int) {
	f.t.Helper()
	for i := range n {
		key := fmt.Sprintf("create-%05d", i)
		f.ids = append(f.ids, events.KeyID("sim", key))
		msg, err := json.Marshal(events.Submit{V: 1, IdempotencyKey: key, Model: "create/model", Input: json.RawMessage(`{}`)})
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
	waitFor(f.t, "creates under way", time.Minute, func() bool { return simStats(f.t, f.simURL).Creates >= some })
	require.Less(f.t, simStats(f.t, f.simURL).Creates, len(f.ids), "creates still in flight when the fault strikes")
}

// check waits for every job and checks the provider's ground truth: one
// create per job, no job lost that the provider has, one terminal event
// each.
func (f *creatingFleet) check(timeout time.Duration) sim.Stats {
	f.t.Helper()
	waitTerminal(f.t, f.js, f.log, f.ids, timeout)
	st := simStats(f.t, f.simURL)
	require.Zero(f.t, st.DuplicateCreates, "no job sent to the provider twice")
	require.Equal(f.t, len(f.ids), st.Creates, "every job created once")
	terminal := f.log.terminal()
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
			bin := binaries(t)
			dir := t.TempDir()
			port := freePort(t)
			url := fmt.Sprintf("nats://127.0.0.1:%d", port)
			node := startNode(t, "nats-server", filepath.Join(bin, "nats-server"), nil,
				"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", filepath.Join(dir, "js"))
			nc, err := nats.Connect(url, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
			require.NoError(t, err)
			t.Cleanup(nc.Close)
			js, err := jetstream.New(nc)
			require.NoError(t, err)
			f := startCreatingFleet(t, bin, dir, js, func(string) string { return url }, 1, idempotent)
			n := size(150, 1500)
			f.submit(n)
			f.whenCreating(n / 5)
			node.restart(syscall.SIGTERM, 5*time.Second)
			st := f.check(3 * time.Minute)
			t.Logf("FAULTS %-28s jobs %d · creates %d · duplicate creates %d", fmt.Sprintf("NATS restart mid-create (idempotent=%v)", idempotent),
				n, st.Creates, st.DuplicateCreates)
		})
	}
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
	bin := binaries(t)
	dir := t.TempDir()
	c := startShippedCluster(t, bin, dir)
	js := c.connect(t)
	f := startCreatingFleet(t, bin, dir, js, c.urlsAs, 3, false)
	n := size(150, 1500)
	f.submit(n)
	f.whenCreating(n / 5)
	leader := streamLeader(t, js, "KV_"+events.Default.JobsBucket())
	node, ok := c.nodes[leader]
	require.True(t, ok, "the job bucket's leader %q is one of the nodes", leader)
	node.stop(syscall.SIGKILL)
	t.Logf("SIGKILLed %s, the job bucket's leader, with %d of %d jobs created", leader, simStats(t, f.simURL).Creates, n)
	<-time.After(10 * time.Second) // one node down
	node.start()
	st := f.check(4 * time.Minute)
	for _, node := range c.nodes {
		require.Empty(t, node.violations(), "%s: every service's traffic is allowed by deploy/nats/accounts.conf", node.name)
	}
	t.Logf("FAULTS %-28s jobs %d · creates %d · duplicate creates %d", "cluster leader SIGKILL mid-create", n, st.Creates, st.DuplicateCreates)
}

// shippedCluster is deploy/nats/cluster's three nodes run as processes,
// their addresses moved to free local ports (flags override the files; the
// store directory goes into a wrapper file, as the server refuses -sd over
// a file that sets it).
type shippedCluster struct {
	nodes map[string]*natsNode // by server name
	ports []int                // client ports
}

func startShippedCluster(t *testing.T, bin, dir string) *shippedCluster {
	t.Helper()
	clusterPorts := []int{freePort(t), freePort(t), freePort(t)}
	c := &shippedCluster{nodes: map[string]*natsNode{}, ports: []int{freePort(t), freePort(t), freePort(t)}}
	for i := range 3 {
		var routes []string
		for j, p := range clusterPorts {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
			}
		}
		name := fmt.Sprintf("nats-%d", i+1)
		c.nodes[name] = startNode(t, name, filepath.Join(bin, "nats-server"), natsPasswordEnv(), "-c", clusterNodeConf(t, dir, i),
			"-a", "127.0.0.1", "-p", strconv.Itoa(c.ports[i]), "-m", strconv.Itoa(freePort(t)),
			"--cluster", fmt.Sprintf("nats://127.0.0.1:%d", clusterPorts[i]), "--routes", strings.Join(routes, ","))
	}
	return c
}

// urlsAs is the cluster's client URLs, as user.
func (c *shippedCluster) urlsAs(user string) string {
	var urls []string
	for _, p := range c.ports {
		urls = append(urls, fmt.Sprintf("nats://%s:%s@127.0.0.1:%d", user, natsPasswords[user], p))
	}
	return strings.Join(urls, ",")
}

// connect connects as admin once the cluster has a JetStream meta leader.
func (c *shippedCluster) connect(t *testing.T) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(c.urlsAs("admin"), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	waitFor(t, "a JetStream meta leader", 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	return js
}

// clusterNodeConf writes node i's configuration: deploy/nats/cluster's
// file with its store under dir.
func clusterNodeConf(t *testing.T, dir string, i int) string {
	t.Helper()
	node, err := filepath.Rel(dir, filepath.Join(deployDir(t), "nats", "cluster", fmt.Sprintf("nats-%d.conf", i+1)))
	require.NoError(t, err)
	conf := filepath.Join(dir, fmt.Sprintf("nats-%d.conf", i+1))
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf("include %q\njetstream {store_dir: %q, max_file_store: 64GB}\n",
		node, filepath.Join(dir, fmt.Sprintf("js-%d", i+1)))), 0o600))
	return conf
}

// streamLeader is the server name of a stream's leader.
func streamLeader(t *testing.T, js jetstream.JetStream, stream string) string {
	t.Helper()
	var leader string
	waitFor(t, "a leader of "+stream, 30*time.Second, func() bool {
		if ci := streamCluster(js, stream); ci != nil {
			leader = ci.Leader
		}
		return leader != ""
	})
	return leader
}

// streamCluster is a stream's cluster information; nil when it cannot be
// read now.
func streamCluster(js jetstream.JetStream, stream string) *jetstream.ClusterInfo {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil
	}
	return info.Cluster
}
