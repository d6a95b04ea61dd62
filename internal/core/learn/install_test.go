package learn

import (
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/schedule"
)

// A process's own write and the watch hand over the same revisions in no
// fixed order: the watch may deliver another process's later write before
// this one's fold installs its own. The older revision must never win, or
// the process keeps a stale distribution until the key is written again.
func TestAnOlderRevisionNeverReplacesANewer(t *testing.T) {
	t.Parallel()
	s := New(nil, zerolog.Nop())
	dist := func(n int) *schedule.Dist {
		var d schedule.Dist
		for range n {
			d.Observe(time.Minute)
		}
		return &d
	}
	s.install("r.k", snapshot{total: dist(120), run: dist(120), rev: 3}) // the watch, first
	s.install("r.k", snapshot{total: dist(80), run: dist(80), rev: 2})   // this process's fold, late
	require.Equal(t, uint64(120), s.dist["r.k"].total.Count())

	s.install("r.k", snapshot{rev: 4}) // deleted
	s.install("r.k", snapshot{total: dist(1), run: dist(1), rev: 3})
	require.Nil(t, s.dist["r.k"].total, "a write older than the delete stays deleted")
}
