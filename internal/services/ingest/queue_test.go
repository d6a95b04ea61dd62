package ingest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/route"
)

// Tenants are served in proportion to their weights, and a tenant that
// starts waiting late starts level with the others, not owed the past.
func TestQueueServesTenantsByWeight(t *testing.T) {
	q := newQueue("acct")
	q.add(&route.Route{Name: "r", SubmitWorkers: 4, Weights: map[string]float64{"vip": 3}})
	served := map[string]int{}
	pick := func(tenants ...string) {
		tn := q.order(tenants)[0]
		served[tn]++
		q.mu.Lock()
		q.charge(tn) // as admitNext does
		q.mu.Unlock()
	}
	for range 400 {
		pick("vip", "std")
	}
	require.Equal(t, 300, served["vip"], "weight 3 against 1")
	require.Equal(t, 100, served["std"])

	for range 10 {
		pick("vip", "std", "late")
	}
	require.InDelta(t, 10*1.0/5, served["late"], 2, "the late tenant gets its share from now on, no catching up")
}
