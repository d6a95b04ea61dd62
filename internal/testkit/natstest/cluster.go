package natstest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/embedded"
)

// Node is one server of a Cluster.
type Node struct {
	Name              string
	dir               string
	port, clusterPort int
	s                 *server.Server
}

// Cluster is three embedded JetStream servers clustered on loopback, each
// with its own files and fixed ports, so a node can be stopped and started
// again as the same peer.
type Cluster struct {
	t      testing.TB
	mu     sync.Mutex
	Nodes  []*Node
	routes []string
}

// NewCluster starts a three-node cluster, shut down when the test ends.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	for i := range 3 {
		n := &Node{Name: fmt.Sprintf("n%d", i+1), dir: t.TempDir(), port: FreePort(t), clusterPort: FreePort(t)}
		c.Nodes = append(c.Nodes, n)
		c.routes = append(c.routes, fmt.Sprintf("nats://127.0.0.1:%d", n.clusterPort))
	}
	for _, n := range c.Nodes {
		c.Start(n.Name)
	}
	t.Cleanup(func() {
		for _, n := range c.Nodes {
			c.Stop(n.Name)
		}
	})
	return c
}

// Connect connects to the cluster, failing over between its nodes and
// reconnecting for ever (every 100 ms); the connection is closed when the
// test ends.
func (c *Cluster) Connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return reconnecting(t, c.URL())
}

// URL lists every node's client URL, for a client that fails over.
func (c *Cluster) URL() string {
	var urls []string
	for _, n := range c.Nodes {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", n.port))
	}
	return strings.Join(urls, ",")
}

func (c *Cluster) node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	c.t.Fatalf("no node %q", name)
	return nil
}

// Start starts the named node (again) on its ports and files.
func (c *Cluster) Start(name string) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.node(name)
	if n.s != nil {
		return
	}
	s, err := embedded.Start(embedded.Config{
		StoreDir: n.dir, Port: n.port, ServerName: n.Name,
		Cluster: server.ClusterOpts{Name: "pollux-test", Host: "127.0.0.1", Port: n.clusterPort},
		Routes:  c.routes,
		// Three servers forming under make test's load (the race detector,
		// every package at once on two cores) can take more than the
		// default 10 s.
		StartTimeout: time.Minute,
	})
	require.NoError(c.t, err)
	n.s = s
}

// Stop shuts the named node down (a clean shutdown, as a rolling restart
// or a lost machine looks to its peers).
func (c *Cluster) Stop(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.node(name)
	if n.s == nil {
		return
	}
	n.s.Shutdown()
	n.s.WaitForShutdown()
	n.s = nil
}

// FreePort is a loopback TCP port free now, for a process to listen on.
func FreePort(t testing.TB) int {
	t.Helper()
	// Below the kernel's ephemeral range (32768 and up on Linux): a port
	// the kernel hands out is free again the moment the listener closes,
	// and the next outgoing connection may take it before the process the
	// port is for binds it ("address already in use", seen in CI).
	for range 100 {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000)))
		if err == nil {
			port := ln.Addr().(*net.TCPAddr).Port
			_ = ln.Close()
			return port
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port
}
