package faces_test

import (
	"testing"

	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
)

func TestMain(m *testing.M) { e2etest.Main(m) }
