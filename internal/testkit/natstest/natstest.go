// Package natstest starts embedded NATS servers for tests: a single node, or
// a three-node cluster on loopback.
package natstest

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/embedded"
)

// Server starts a single JetStream server with file storage in a temporary
// directory, shut down when the test ends.
func Server(t testing.TB) *server.Server {
	t.Helper()
	s, err := embedded.Start(embedded.Config{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// ServerWithConfig starts a server from the configuration file at conf
// (its listen address, store directory, accounts and permissions), shut
// down when the test ends. The test may rewrite the file and Reload.
func ServerWithConfig(t testing.TB, conf string) *server.Server {
	t.Helper()
	opts, err := server.ProcessConfigFile(conf)
	require.NoError(t, err)
	opts.NoSigs, opts.NoLog = true, true
	s, err := server.NewServer(opts)
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second), "the server from %s starts", conf)
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// ConnectAs connects to s as user, whose password is the user's name, and
// returns the JetStream context; permission errors the server sends
// asynchronously are not logged. The connection is closed when the test
// ends.
func ConnectAs(t testing.TB, s *server.Server, user string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(user, user), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

// Connect connects to s and returns the connection and its JetStream
// context; the connection is closed when the test ends.
func Connect(t testing.TB, s *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

// JetStream starts a server and connects to it.
func JetStream(t testing.TB) (*server.Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	s := Server(t)
	nc, js := Connect(t, s)
	return s, nc, js
}

// Restartable is a single JetStream server that a test can stop and start
// again on the same port and files, as an operator restarts one.
type Restartable struct {
	dir  string
	port int
	mu   sync.Mutex
	srv  *server.Server
}

// NewRestartable starts a restartable server, shut down when the test
// ends.
func NewRestartable(t testing.TB) *Restartable {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &Restartable{dir: t.TempDir(), port: ln.Addr().(*net.TCPAddr).Port}
	require.NoError(t, ln.Close())
	r.srv, err = embedded.Start(embedded.Config{StoreDir: r.dir, Port: r.port})
	require.NoError(t, err)
	t.Cleanup(r.Stop)
	return r
}

// URL is the server's client URL.
func (r *Restartable) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", r.port) }

// Connect connects to the server, reconnecting forever (every 100 ms);
// the connection is closed when the test ends.
func (r *Restartable) Connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return reconnecting(t, r.URL())
}

// reconnecting connects to url (one or more servers), reconnecting
// forever every 100 ms; the connection is closed when the test ends.
func reconnecting(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

// Stop shuts the server down (gracefully); stopping a stopped server does
// nothing.
func (r *Restartable) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		r.srv.Shutdown()
		r.srv.WaitForShutdown()
		r.srv = nil
	}
}

// Start starts the stopped server again on its port and files.
func (r *Restartable) Start(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		return
	}
	s, err := embedded.Start(embedded.Config{StoreDir: r.dir, Port: r.port})
	require.NoError(t, err)
	r.srv = s
}

// Restart stops the server, waits down, and starts it again; it returns
// how long it was down.
func (r *Restartable) Restart(t testing.TB, down time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	r.Stop()
	<-time.After(down)
	r.Start(t)
	return time.Since(start)
}
