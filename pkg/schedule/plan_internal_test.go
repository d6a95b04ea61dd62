package schedule

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// bruteForce is the dynamic programme without the Monge bound: the cost to
// go from every cell.
func bruteForce(s []float64, step float64, c costs) []float64 {
	n := len(s)
	ka := max(1, int(math.Ceil(c.minGap/step-1e-9)))
	kb := max(ka, int(c.maxGap/step+1e-9))
	w := make([]float64, n+1)
	for i := n - 1; i >= 0; i-- {
		best := math.Inf(1)
		for j := min(i+ka, n); j <= min(i+kb, n); j++ {
			best = min(best, s[i]*float64(j-i)*step/c.cost+w[j])
		}
		w[i] = s[i] + best
	}
	return w
}

// cost is the expected cost of following a plan from cell 0.
func cost(pl *Plan, s []float64, c costs) float64 {
	total := 0.0
	for i := 0; i < len(s); i = int(pl.next[i]) {
		total += s[i] * (1 + float64(int(pl.next[i])-i)*pl.step/c.cost)
	}
	return total
}

func TestSolveMatchesBruteForce(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		// A random survival curve: random drops, flat stretches, modes.
		n := 50 + r.IntN(400)
		s := make([]float64, n)
		v := 1.0
		for i := range s {
			s[i] = v
			if r.IntN(3) == 0 {
				v *= r.Float64()*0.2 + 0.8
			}
		}
		c := costs{cost: 0.1 + 10*r.Float64(), minGap: 0.5 + 2*r.Float64(), maxGap: 5 + 60*r.Float64()}
		step := 0.25 + r.Float64()
		pl := solve(s, step, c, nil)
		want := bruteForce(s, step, c)[0]
		if got := cost(pl, s, c); math.Abs(got-want) > 1e-9*want {
			t.Fatalf("trial %d: the plan costs %v, the optimum %v", trial, got, want)
		}
	}
}

func BenchmarkOptimal(b *testing.B) {
	for _, sigma := range []float64{0.25, 1} {
		r := rand.New(rand.NewPCG(1, 2))
		var d Dist
		for range 500 {
			d.Observe(seconds(90 * math.Exp(sigma*r.NormFloat64())))
		}
		c := Policy{}.WithDefaults().costs()
		b.Run("sigma="+strconv.FormatFloat(sigma, 'g', -1, 64), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				build(&d, c)
			}
		})
	}
}
