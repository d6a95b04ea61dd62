// Package faultpoint crashes the process at named points, for the fault
// tests: POLLUX_FAULTPOINTS="after-submit:0.05,before-ack:0.01" makes each
// named point kill the process (exit status 137, as a SIGKILL would) with
// that probability. It lets a test kill a process exactly where a random
// SIGKILL would rarely land, such as between a provider's answer and the
// write that records it. Unset, Hit costs one map lookup on an empty map.
package faultpoint

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Env is the environment variable that arms fault points.
const Env = "POLLUX_FAULTPOINTS"

var points = sync.OnceValue(func() map[string]float64 {
	m, err := Parse(os.Getenv(Env))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", Env, err)
		os.Exit(2)
	}
	return m
})

// Parse reads "name:probability,..." into a map.
func Parse(s string) (map[string]float64, error) {
	m := map[string]float64{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, p, ok := strings.Cut(part, ":")
		v, err := strconv.ParseFloat(p, 64)
		if !ok || err != nil || v < 0 || v > 1 || name == "" {
			return nil, fmt.Errorf("%q is not name:probability with a probability in [0,1]", part)
		}
		m[name] = v
	}
	return m, nil
}

// Hit crashes the process with the probability armed for name.
func Hit(name string) {
	if p, ok := points()[name]; ok && rand.Float64() < p {
		fmt.Fprintf(os.Stderr, "faultpoint %s: crashing\n", name)
		os.Exit(137)
	}
}
