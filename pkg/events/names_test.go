package events_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/pkg/events"
)

func TestNamespace(t *testing.T) {
	t.Parallel()
	n := events.Default
	require.Equal(t, "pollux.submit.rep", n.Submit("rep"))
	require.Equal(t, "pollux.checks.rep.job-1", n.Check("rep", "job-1"))
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

	r, j, err := n.ParseCheck("pollux.checks.rep.job-1")
	require.NoError(t, err)
	require.Equal(t, []string{"rep", "job-1"}, []string{r, j})
	_, _, err = n.ParseCheck("pollux.checks.rep")
	require.ErrorIs(t, err, events.ErrSubject)

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
