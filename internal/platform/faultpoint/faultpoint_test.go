package faultpoint_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/faultpoint"
)

func TestParse(t *testing.T) {
	t.Parallel()
	m, err := faultpoint.Parse(" after-submit:0.05, before-ack:1 ")
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"after-submit": 0.05, "before-ack": 1}, m)
	for _, bad := range []string{"x", "x:2", ":0.5", "x:y"} {
		_, err := faultpoint.Parse(bad)
		require.Error(t, err, bad)
	}
}

// TestHit runs this test binary again with a point armed at 1: a build
// with the faultpoints tag crashes there (exit 137), any other build
// carries on; an unarmed point never crashes.
func TestHit(t *testing.T) {
	if os.Getenv("FAULTPOINT_CHILD") == "1" {
		faultpoint.Hit("boom")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHit$")
	cmd.Env = append(os.Environ(), "FAULTPOINT_CHILD=1", faultpoint.Env+"=boom:1")
	err := cmd.Run()
	if faultpoint.Enabled {
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		require.Equal(t, 137, ee.ExitCode())
	} else {
		require.NoError(t, err, "a build without the %s tag has no crash points", faultpoint.Tag)
	}

	cmd = exec.Command(os.Args[0], "-test.run=^TestHit$")
	cmd.Env = append(os.Environ(), "FAULTPOINT_CHILD=1", faultpoint.Env+"=other:1")
	require.NoError(t, cmd.Run(), "an unarmed point does nothing")
}
