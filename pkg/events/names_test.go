package events_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/events"
)

func TestNamespace(t *testing.T) {
	t.Parallel()
	n := events.Default
	require.Equal(t, "pollux.submit.rep", n.Submit("rep"))
	require.Equal(t, "pollux.checks.rep.22.job-1", n.Check("rep", "job-1"))
	require.Equal(t, "pollux.events.rep.job-1", n.Event("rep", "job-1"))
	require.Equal(t, "POLLUX_CHECKS", n.ChecksStream())
	require.Equal(t, "pollux-jobs", n.JobsBucket())

	kind, route, err := n.ParseIntake("pollux.cancel.rep")
	require.NoError(t, err)
	require.Equal(t, events.KindCancel, kind)
	require.Equal(t, "rep", route)
	_, _, err = n.ParseIntake("pollux.poke.rep")
	require.ErrorIs(t, err, events.ErrSubject)
	_, _, err = n.ParseIntake("other.submit.rep")
	require.ErrorIs(t, err, events.ErrSubject)

	r, j, err := n.ParseCheck(n.Check("rep", "job-1"))
	require.NoError(t, err)
	require.Equal(t, []string{"rep", "job-1"}, []string{r, j})
	for _, bad := range []string{"pollux.checks.rep", "pollux.checks.rep.job-1", "pollux.checks.rep.21.job-1", "pollux.checks.rep.x.10.job-1"} {
		_, _, err = n.ParseCheck(bad)
		require.ErrorIs(t, err, events.ErrSubject, bad)
	}

	custom, err := events.NewNamespace("acme-prod")
	require.NoError(t, err)
	require.Equal(t, "ACME_PROD_INTAKE", custom.IntakeStream())
	_, err = events.NewNamespace("a.b")
	require.Error(t, err)
}

func TestValidToken(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"a": true, "A-z_09": true, "": false, "a.b": false, "a b": false, "a*": false, "é": false,
	} {
		require.Equal(t, want, events.ValidToken(s), s)
	}
}

func TestCheckPartitions(t *testing.T) {
	t.Parallel()
	n := events.Default
	require.Equal(t, []string{"pollux.checks.rep.*.*"}, n.PartitionChecks("rep", 0, 1))
	// Every slot belongs to exactly one partition, for any partition count.
	for _, parts := range []int{1, 2, 3, 4, 7, 64} {
		seen := map[string]int{}
		for p := range parts {
			for _, f := range n.PartitionChecks("rep", p, parts) {
				seen[f]++
			}
		}
		if parts > 1 {
			require.Len(t, seen, events.CheckSlots, "%d partitions", parts)
		}
		for f, k := range seen {
			require.Equal(t, 1, k, "%s in one partition of %d", f, parts)
		}
	}
	// Slots spread ids evenly enough: no slot holds more than twice its share.
	counts := make([]int, events.CheckSlots)
	for i := range 64_000 {
		counts[events.CheckSlot(fmt.Sprintf("k-%d", i))]++
	}
	for s, c := range counts {
		require.Less(t, c, 2000, "slot %d", s)
		require.Greater(t, c, 500, "slot %d", s)
	}

	require.Equal(t, "poller-rep", n.PartitionConsumer("rep", 0, 1))
	require.Equal(t, "poller-rep~2of4", n.PartitionConsumer("rep", 2, 4))
	for name, want := range map[string][3]any{
		"poller-rep": {"rep", 0, 1}, "poller-rep~2of4": {"rep", 2, 4}, "poller-a-b~0of64": {"a-b", 0, 64},
	} {
		route, p, parts, ok := n.ParsePollerConsumer(name)
		require.True(t, ok, name)
		require.Equal(t, want, [3]any{route, p, parts}, name)
	}
	for _, bad := range []string{"ingest-rep", "poller-", "poller-rep~4of4", "poller-rep~0of1", "poller-rep~0of65", "poller-rep~01of4", "poller-rep~xof4", "poller-a.b"} {
		_, _, _, ok := n.ParsePollerConsumer(bad)
		require.False(t, ok, bad)
	}
}
