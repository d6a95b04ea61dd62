package frontdoor_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test started has stopped when the package's tests
// end — but one of nats.go's: output custody's object store Put (in the
// kept outputs' test) publishes asynchronously, and when the connection
// closes right after the first such publish, nats.go's watcher of
// reconnects can start after the close and wait on a channel the close
// already cleared (nats.go v1.55 jetstream/publish.go).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"))
}
