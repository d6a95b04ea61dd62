package app_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/wiring/app"
)

// A handler still waiting when the server stops (the simulated provider's
// hang, 30 s by default) sees its request end: the shutdown finishes
// within its grace and reports nothing. Without the request contexts'
// end, Shutdown outlasts its 5 s grace and returns "context deadline
// exceeded", a stack's stop error with no one to blame.
func TestAStoppingServerEndsWaitingRequests(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	entered := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- app.ServeHTTP(ctx, "test", ln, h) }()

	called := make(chan struct{})
	go func() {
		defer close(called)
		resp, err := http.Get("http://" + ln.Addr().String())
		if err == nil {
			_ = resp.Body.Close()
		}
	}()
	<-entered
	cancel()
	require.NoError(t, <-done)
	<-called
}

// A listener that fails names the server it was serving.
func TestAServerErrorNamesTheServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, ln.Close())
	err = app.ServeHTTP(t.Context(), "simulated provider", ln, http.NotFoundHandler())
	require.ErrorContains(t, err, "simulated provider server: ")
}

// A connection a client opened and sent nothing on holds net/http's
// Shutdown for 5 s, the server's whole grace: it is closed, and the stop
// is no error (it was, intermittently, a stack's stop error).
func TestAStoppingServerClosesSilentConnections(t *testing.T) {
	t.Parallel()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := &notifying{Listener: inner, accepted: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- app.ServeHTTP(ctx, "test", ln, http.NotFoundHandler()) }()
	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	<-ln.accepted // a new connection, no request yet
	cancel()
	require.NoError(t, <-done)
}

// notifying is a listener that says when it accepted a connection.
type notifying struct {
	net.Listener
	accepted chan struct{}
}

func (l *notifying) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		select {
		case l.accepted <- struct{}{}:
		default:
		}
	}
	return c, err
}
