package httpserve_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/httpserve"
)

func TestRunServesUntilTheContextEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	done := make(chan error, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })}
	go func() { done <- httpserve.Run(ctx, ln, srv, time.Second, func() { close(stopped) }) }()

	resp, err := http.Get("http://" + ln.Addr().String())
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusTeapot, resp.StatusCode)

	cancel()
	require.NoError(t, <-done)
	<-stopped // onStop ran
	resp, err = http.Get("http://" + ln.Addr().String())
	if err == nil {
		_ = resp.Body.Close()
	}
	require.Error(t, err, "the listener is closed")
}

func TestRunReportsAFailedListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, ln.Close())
	err = httpserve.Run(context.Background(), ln, &http.Server{}, time.Second, nil)
	require.Error(t, err)
}
