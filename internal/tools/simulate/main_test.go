package simulate

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test started has stopped when the package's tests end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// mustRun is newRun, failing the test on an error.
func mustRun(tb testing.TB, jobs []Job, cfg Config) *run {
	tb.Helper()
	r, err := newRun(jobs, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}
