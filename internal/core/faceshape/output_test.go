package faceshape_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/faceshape"
	"github.com/pollux-dev/pollux/pkg/state"
)

// An output is Pollux's to serve once custody saved it, and while custody
// has yet to decide on a route that keeps outputs; not once custody
// recorded it not kept, nor on a route that keeps none.
func TestKept(t *testing.T) {
	t.Parallel()
	saved := &state.Custody{SavedAt: time.Now(), Outputs: []state.SavedOutput{
		{Index: 0, Status: state.OutputSaved, Object: "j/0"}, {Index: 1, Status: state.OutputGone}}}
	for _, c := range []struct {
		name       string
		job        state.Job
		n          int
		routeKeeps bool
		kept       bool
	}{
		{"saved", state.Job{State: state.Succeeded, Outputs: []string{"a", "b"}, Custody: saved}, 0, true, true},
		{"saved, the route keeping no more", state.Job{State: state.Succeeded, Outputs: []string{"a", "b"}, Custody: saved}, 0, false, true},
		{"custody found it gone", state.Job{State: state.Succeeded, Outputs: []string{"a", "b"}, Custody: saved}, 1, true, false},
		{"custody to come", state.Job{State: state.Succeeded, Outputs: []string{"a"}}, 0, true, true},
		{"custody only warned", state.Job{State: state.Succeeded, Outputs: []string{"a"}, Custody: &state.Custody{ExpiringAt: time.Now()}}, 0, true, true},
		{"a route that keeps none", state.Job{State: state.Succeeded, Outputs: []string{"a"}}, 0, false, false},
		{"no such output", state.Job{State: state.Succeeded, Outputs: []string{"a"}}, 1, true, false},
		{"not succeeded", state.Job{State: state.Running, Outputs: []string{"a"}}, 0, true, false},
	} {
		require.Equal(t, c.kept, faceshape.Kept(&c.job, c.n, c.routeKeeps), c.name)
	}
}
