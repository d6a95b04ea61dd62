// Package natstest starts embedded NATS servers for tests: a single node, or
// a three-node cluster on loopback.
package natstest

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/embedded"
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
