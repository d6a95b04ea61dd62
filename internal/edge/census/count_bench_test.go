package census

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/pkg/events"
)

// BenchmarkCountParked measures what counting a route's parked checks
// costs the server (and holds the checks stream for) with a million
// checks in the stream, half of them parked: the census's count from one
// slot against a count of every slot (go test -run - -bench CountParked
// ./internal/edge/census; seeding takes ~10 s).
func BenchmarkCountParked(b *testing.B) {
	ctx := context.Background()
	_, _, js := natstest.JetStream(b)
	ns := events.Default
	res, err := ns.Setup(ctx, js, events.Options{})
	require.NoError(b, err)
	natstest.PublishMany(b, js, 1_000_000, func(i int) (string, []byte) {
		id := fmt.Sprintf("job-%08d", i)
		if i%2 == 1 {
			return ns.Parked("r", id), []byte(`{"v":1}`)
		}
		return ns.Check("r", id), []byte(`{"v":1}`)
	})
	b.Run("census", func(b *testing.B) {
		for b.Loop() {
			n, err := countParked(ctx, ns, res, "r")
			require.NoError(b, err)
			require.InEpsilon(b, 500_000, n, 0.05)
		}
	})
	b.Run("every-slot", func(b *testing.B) {
		for b.Loop() {
			n, err := countParkedOn(ctx, ns, res, ns.ParkedChecks("r"))
			require.NoError(b, err)
			require.Equal(b, 500_000, n)
		}
	})
}
