package dev_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test started has stopped when the package's tests
// end: the stacks (dev.Start), the demo runs (dev.Run) and pollux serve.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
