// Package httpserve runs an HTTP server for as long as its context lasts:
// the one graceful-shutdown sequence every Pollux listener shares.
package httpserve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Run serves srv on ln until ctx ends, then shuts it down, giving requests
// in flight up to grace to finish. onStop, when not nil, runs first: it
// ends long-lived responses (event streams) that Shutdown would otherwise
// wait for. A listener that fails before ctx ends returns its error at
// once; a shutdown that outlasts grace returns the context's error.
func Run(ctx context.Context, ln net.Listener, srv *http.Server, grace time.Duration, onStop func()) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if onStop != nil {
		onStop()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
