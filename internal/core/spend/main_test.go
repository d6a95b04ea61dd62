package spend_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test started has stopped when the package's tests end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
