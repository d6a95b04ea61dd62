package report_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/census"
	"github.com/pollux-dev/pollux/internal/edge/report"
)

// pollux stats shows each budget level, the jobs waiting for slots and
// the call rates learned.
func TestPrintShowsLevels(t *testing.T) {
	r := &report.Report{
		At: time.Now(),
		Levels: []census.Level{
			{Level: "account main", Leases: map[string]census.Leases{"submit": {Out: 2, Cap: 4}}, Running: &census.Leases{Out: 5, Cap: 5}},
			{Level: "global", Running: &census.Leases{Out: 7, Cap: 100}},
		},
		Waiting: map[string]int{"account main": 12},
		Rates:   []census.Rate{{Level: "account main", Kind: "status", Rate: 3.5, Configured: 10, Lowered: 2}},
	}
	var b bytes.Buffer
	r.Print(&b)
	require.Contains(t, b.String(), "account main             submit leases 2/4 · running 5/5")
	require.Contains(t, b.String(), "global                   running 7/100")
	require.Contains(t, b.String(), "account main             12 jobs waiting to start")
	require.Contains(t, b.String(), "account main             status rate learned 3.5/s (configured 10/s; lowered 2 times)")
}
