package simulate

import "testing"

// BenchmarkSimulate runs 100 000 jobs through one strategy.
func BenchmarkSimulate(b *testing.B) {
	w, _ := LookupWorkload("lognormal-0.5")
	r := mustRun(b, w.Jobs(100_000, 1), Config{}.withDefaults())
	for _, name := range []string{"adaptive", "seed-table", "optimal", "google"} {
		s, _ := ParseStrategy(name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.simulate(s, r.same(r.cfg.knob(s)))
			}
		})
	}
}
