package simulate

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// recorder polls every 3 s and records, at each decision, how many
// completions it had been told of.
type recorder struct {
	decisions []decision
	dones     int
}

type decision struct {
	at    float64
	dones int
}

func (rc *recorder) next(_ int, _ *jobState, now float64) float64 {
	rc.decisions = append(rc.decisions, decision{now, rc.dones})
	return 3
}

func (rc *recorder) done(int, float64, bool) { rc.dones++ }

func TestNoPeeking(t *testing.T) {
	t.Parallel()
	w, _ := LookupWorkload("bimodal")
	r := mustRun(t, w.Jobs(3000, 4), Config{}.withDefaults())
	rc := &recorder{}
	out := r.replay(rc)
	// Every detection time, from the outcome.
	var seen []float64
	for i := range r.jobs {
		seen = append(seen, r.jobs[i].end()+out.delay[i])
	}
	slices.Sort(seen)
	for _, d := range rc.decisions {
		// Completions seen at or before the decision, and none after.
		n, _ := slices.BinarySearch(seen, d.at+1e-9)
		require.Equal(t, n, d.dones, "at %v", d.at)
	}
}

func TestQueueOrders(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 1))
	var q queue
	var want []float64
	for range 5000 {
		if len(q) > 0 && r.IntN(3) == 0 {
			e := q.pop()
			require.Equal(t, want[0], e.at)
			want = want[1:]
			continue
		}
		x := r.Float64() * 100
		q.push(event{at: x})
		want = append(want, x)
		slices.Sort(want)
	}
}
