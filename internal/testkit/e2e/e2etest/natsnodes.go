package e2etest

import (
	"context"
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
)

// NATSPasswords are the passwords deploy/nats/accounts.conf reads from the
// server's environment, by user.
var NATSPasswords = map[string]string{
	"sys": "pSys1", "ingest": "pIngest1", "poller": "pPoller1", "webhook": "pWebhook1",
	"client": "pClient1", "admin": "pAdmin1",
}

// NATSPasswordEnv is the environment the accounts file's passwords come from.
func NATSPasswordEnv() []string {
	var env []string
	for user, pw := range NATSPasswords {
		env = append(env, "NATS_"+strings.ToUpper(user)+"_PASSWORD="+pw)
	}
	return env
}

// ViolationLine is a server's log line about a permission violation.
var ViolationLine = regexp.MustCompile(`(?m)^.*Violation.*$`)

// NATSNode is a nats-server process that a test can stop (SIGTERM or
// SIGKILL) and start again on the same port and store, as an operator or a
// crash would.
type NATSNode struct {
	t    *testing.T
	Name string
	bin  string
	env  []string
	args []string
	mu   sync.Mutex
	cur  *Proc
	all  []*Proc // every run, for their logs
	runs int
}

// StartNode starts the nats-server at bin, named name, with env added to
// the test's environment and args.
func StartNode(t *testing.T, name, bin string, env []string, args ...string) *NATSNode {
	t.Helper()
	n := &NATSNode{t: t, Name: name, bin: bin, env: env, args: args}
	n.Start()
	return n
}

// Start starts the server again (after Stop).
func (n *NATSNode) Start() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.runs++
	n.cur = Launch(n.t, fmt.Sprintf("%s-%d", n.Name, n.runs), n.env, n.bin, n.args...)
	n.all = append(n.all, n.cur)
}

// Violations are the permission violations every run of the server logged.
func (n *NATSNode) Violations() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var seen []string
	for _, p := range n.all {
		seen = append(seen, ViolationLine.FindAllString(ReadLog(n.t, p), -1)...)
	}
	return seen
}

// Stop stops the server with sig and waits for it to exit.
func (n *NATSNode) Stop(sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	require.NoError(n.t, n.cur.Cmd.Process.Signal(sig))
	<-n.cur.done
}

// Restart stops the server, keeps it down for down, and starts it again.
func (n *NATSNode) Restart(sig syscall.Signal, down time.Duration) {
	n.Stop(sig)
	<-time.After(down)
	n.Start()
}

// StoppableNATS starts a nats-server process (from the binaries in bin)
// with its store under dir, which the test can stop and start again on
// the same port and store, and connects to it (the connection reconnects
// for ever): it returns the node, its URL and the connection's JetStream.
func StoppableNATS(t *testing.T, bin, dir string) (*NATSNode, string, jetstream.JetStream) {
	t.Helper()
	port := FreePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	node := StartNode(t, "nats-server", filepath.Join(bin, "nats-server"), nil,
		"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", filepath.Join(dir, "js"))
	nc, err := nats.Connect(url, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return node, url, js
}

// ShippedCluster is deploy/nats/cluster's three nodes run as processes,
// their addresses moved to free local ports (flags override the files; the
// store directory goes into a wrapper file, as the server refuses -sd over
// a file that sets it).
type ShippedCluster struct {
	Nodes map[string]*NATSNode // by server name
	ports []int                // client ports
}

// StartShippedCluster starts deploy/nats/cluster's nodes from the
// nats-server in bin, their stores under dir.
func StartShippedCluster(t *testing.T, bin, dir string) *ShippedCluster {
	t.Helper()
	clusterPorts := []int{FreePort(t), FreePort(t), FreePort(t)}
	c := &ShippedCluster{Nodes: map[string]*NATSNode{}, ports: []int{FreePort(t), FreePort(t), FreePort(t)}}
	for i := range 3 {
		var routes []string
		for j, p := range clusterPorts {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
			}
		}
		name := fmt.Sprintf("nats-%d", i+1)
		c.Nodes[name] = StartNode(t, name, filepath.Join(bin, "nats-server"), NATSPasswordEnv(), "-c", clusterNodeConf(t, dir, i),
			"-a", "127.0.0.1", "-p", strconv.Itoa(c.ports[i]), "-m", strconv.Itoa(FreePort(t)),
			"--cluster", fmt.Sprintf("nats://127.0.0.1:%d", clusterPorts[i]), "--routes", strings.Join(routes, ","))
	}
	return c
}

// URLsAs is the cluster's client URLs, as user.
func (c *ShippedCluster) URLsAs(user string) string {
	var urls []string
	for _, p := range c.ports {
		urls = append(urls, fmt.Sprintf("nats://%s:%s@127.0.0.1:%d", user, NATSPasswords[user], p))
	}
	return strings.Join(urls, ",")
}

// Connect connects as admin once the cluster can place a replicated
// stream: a meta leader is elected and every node is its JetStream peer
// (services started before that wait for it only so long, 30 s).
func (c *ShippedCluster) Connect(t *testing.T) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(c.URLsAs("admin"), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	WaitFor(t, "a JetStream cluster that places R3 streams", time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "E2E_READY", Subjects: []string{"e2e.ready"},
			Storage: jetstream.MemoryStorage, Replicas: len(c.Nodes)})
		return err == nil && js.DeleteStream(ctx, "E2E_READY") == nil
	})
	return js
}

// clusterNodeConf writes node i's configuration: deploy/nats/cluster's
// file with its store under dir.
func clusterNodeConf(t *testing.T, dir string, i int) string {
	t.Helper()
	node, err := filepath.Rel(dir, filepath.Join(DeployDir(t), "nats", "cluster", fmt.Sprintf("nats-%d.conf", i+1)))
	require.NoError(t, err)
	conf := filepath.Join(dir, fmt.Sprintf("nats-%d.conf", i+1))
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf("include %q\njetstream {store_dir: %q, max_file_store: 64GB}\n",
		node, filepath.Join(dir, fmt.Sprintf("js-%d", i+1)))), 0o600))
	return conf
}

// StreamLeader is the server name of a stream's leader.
func StreamLeader(t *testing.T, js jetstream.JetStream, stream string) string {
	t.Helper()
	var leader string
	WaitFor(t, "a leader of "+stream, 30*time.Second, func() bool {
		if ci := StreamCluster(js, stream); ci != nil {
			leader = ci.Leader
		}
		return leader != ""
	})
	return leader
}

// StreamCluster is a stream's cluster information; nil when it cannot be
// read now.
func StreamCluster(js jetstream.JetStream, stream string) *jetstream.ClusterInfo {
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
