package tenant_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/tenant"
	"github.com/pollux-dev/pollux/pkg/state"
)

// An app's viewer sees its app's jobs only; an operator's every app's; a
// context no front door marked is an operator's (the process itself).
func TestViewerSees(t *testing.T) {
	t.Parallel()
	studio, rival, none := &state.Job{App: "studio"}, &state.Job{App: "rival"}, &state.Job{}
	v := tenant.Of("studio")
	require.True(t, v.Sees(studio))
	require.False(t, v.Sees(rival))
	require.False(t, v.Sees(none))
	require.False(t, v.Sees(nil))
	require.True(t, tenant.Of("").Sees(none), "a token of no app sees the jobs of none")
	require.False(t, tenant.Of("").Sees(studio))
	for _, j := range []*state.Job{studio, rival, none} {
		require.True(t, tenant.Operator.Sees(j))
	}
	require.False(t, v.SeesFleet(), "an app sees no fleet numbers")
	require.False(t, tenant.Of("").SeesFleet())
	require.True(t, tenant.Operator.SeesFleet())
	require.Equal(t, tenant.Operator, tenant.From(context.Background()))
	require.Equal(t, v, tenant.From(tenant.With(context.Background(), v)))
}

func BenchmarkSees(b *testing.B) {
	ctx := tenant.With(context.Background(), tenant.Of("studio"))
	j := &state.Job{App: "studio"}
	for b.Loop() {
		if !tenant.From(ctx).Sees(j) {
			b.Fatal("unseen")
		}
	}
}
