package e2etest

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/events"
	"github.com/pollux-dev/pollux/pkg/provider/sim"
)

// Scale is the time scale most scenarios run the simulated provider at.
const Scale = 50

// D is a duration in the simulator's configuration.
func D(t time.Duration) sim.Duration { return sim.Duration(t) }

// The fault suite. make test runs each scenario in a short form; make
// chaos sets POLLUX_CHAOS=long for the long one.

// Long reports whether the fault scenarios run in their long form.
func Long() bool { return os.Getenv("POLLUX_CHAOS") == "long" }

// Size is short, or long_ in the long form of the fault suite.
func Size(short, long_ int) int {
	if Long() {
		return long_
	}
	return short
}

// ReportFaults prints a scenario's line of the fault suite's report.
func ReportFaults(t *testing.T, scenario string, o Outcome) {
	t.Helper()
	t.Logf("FAULTS %-28s %s", scenario, o)
}

// SubmitN publishes n submissions with keys prefix-i, model(i) choosing
// each one's model and timeout; it returns the job ids.
func SubmitN(t *testing.T, e *Env, prefix string, n int, model func(i int) (string, float64)) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		key := fmt.Sprintf("%s-%05d", prefix, i)
		m, timeout := model(i)
		e.Publish(t, e.NS.Submit(dev.RouteName), events.Submit{V: 1, IdempotencyKey: key, Model: m,
			Input: json.RawMessage(`{}`), TimeoutS: timeout})
		ids[i] = events.KeyID(dev.RouteName, key)
	}
	return ids
}
