// Package faultpoint crashes the process at named points, for the fault
// tests: POLLUX_FAULTPOINTS="after-submit:0.05,before-ack:0.01" makes each
// named point kill the process (exit status 137, as a SIGKILL would) with
// that probability. It lets a test kill a process exactly where a random
// SIGKILL would rarely land, such as between a provider's answer and the
// write that records it.
//
// The crash points exist only in binaries built with the build tag
// faultpoints (go build -tags faultpoints), as the end-to-end tests build
// the fleet (internal/testkit/e2e/e2etest). In every other build — make build, the
// image, go install — Hit is an empty function the compiler removes, and
// the binary does not read POLLUX_FAULTPOINTS at all:
// internal/platform/version's TestMakeBuildStampsVersion checks the shipped
// binaries for it. It is plumbing, not test support: shipped code marks
// its points (ingest's submit step, the front door's face submissions),
// and shipped code imports nothing of internal/testkit.
package faultpoint

import (
	"fmt"
	"strconv"
	"strings"
)

// Env is the environment variable that arms fault points (in a build
// with the faultpoints tag).
const Env = "POLLUX_FAULTPOINTS"

// Tag is the build tag that compiles the crash points in.
const Tag = "faultpoints"

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
