package console_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test started has stopped when the package's tests end:
// the stacks, and chromedp's reading of the browsers.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
