package crash_test

import (
	"testing"

	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
)

// TestMain removes the binaries the package's process tests built.
func TestMain(m *testing.M) { e2etest.Main(m) }
