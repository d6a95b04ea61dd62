// Package e2etest is what the end-to-end test packages under internal/testkit/e2e
// share: the in-process stack on an embedded server (Start), the follower
// of the events stream (EventLog), the checks a fault scenario ends with
// (Verify), the binaries built once per test package (Binaries, Main),
// real processes (Launch, NATSProcess, SimProcess, Supervise), a fleet's
// common setup around a simulated provider or several (StartSimFleet:
// NATS, the providers, pollux.yaml naming their addresses, the services'
// environment)
// and the three-node cluster of deploy/nats/cluster (StartShippedCluster).
//
// It is a library for tests: its functions take the test and fail it.
package e2etest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Root is the repository's root directory: the nearest directory above
// the test's working directory (its package's) that holds go.mod.
func Root(t *testing.T) string {
	t.Helper()
	root.once.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			root.err = err
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				root.dir = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				root.err = os.ErrNotExist
				return
			}
			dir = parent
		}
	})
	require.NoError(t, root.err, "the repository's go.mod above the working directory")
	return root.dir
}

var root struct {
	once sync.Once
	dir  string
	err  error
}

// DeployDir is the repository's deploy/ directory.
func DeployDir(t *testing.T) string {
	t.Helper()
	return filepath.Join(Root(t), "deploy")
}
