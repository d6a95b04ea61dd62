//go:build faultpoints

package faultpoint

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
)

// Enabled reports whether this build has the crash points.
const Enabled = true

var points = sync.OnceValue(func() map[string]float64 {
	m, err := Parse(os.Getenv(Env))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", Env, err)
		os.Exit(2)
	}
	return m
})

// Hit crashes the process with the probability armed for name.
func Hit(name string) {
	if p, ok := points()[name]; ok && rand.Float64() < p {
		fmt.Fprintf(os.Stderr, "faultpoint %s: crashing\n", name)
		os.Exit(137)
	}
}
