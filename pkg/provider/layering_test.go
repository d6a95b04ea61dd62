package provider_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// deps lists the packages the named ones build from, with -f's format.
func deps(t *testing.T, format string, pkgs ...string) []string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command("go", append([]string{"list", "-deps", "-f", format}, pkgs...)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return strings.Fields(string(out))
}

// Adapters and the schedule link no NATS: an adapter can be used, tested
// and vendored without the JetStream client, and the schedule is the
// standard library alone.
func TestAdaptersAndScheduleLinkNoNATS(t *testing.T) {
	for _, p := range deps(t, "{{.ImportPath}}", "github.com/pollux-dev/pollux/pkg/provider/...", "github.com/pollux-dev/pollux/pkg/schedule/...") {
		require.False(t, strings.HasPrefix(p, "github.com/nats-io/"), "pkg/provider or pkg/schedule depends on %s", p)
	}
	nonStandard := deps(t, "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/pollux-dev/pollux/pkg/schedule")
	require.Equal(t, []string{"github.com/pollux-dev/pollux/pkg/schedule"}, nonStandard, "pkg/schedule imports only the standard library")
}
