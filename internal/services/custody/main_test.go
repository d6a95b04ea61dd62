package custody_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test started has stopped when the package's tests
// end — but one of nats.go's: the object store's Put publishes
// asynchronously, and when the connection closes right after the first
// such publish, nats.go's watcher of reconnects can start after the close
// and wait on a channel the close already cleared (nats.go v1.55
// jetstream/publish.go), for as long as the process lives.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"))
}
