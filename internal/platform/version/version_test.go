package version

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// faultEnv is internal/platform/faultpoint's Env, spelled out: importing the
// package here would not change what make build links.
const faultEnv = "POLLUX_FAULTPOINTS"

func TestResolve(t *testing.T) {
	t.Parallel()
	info := func(main string, settings ...string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			bi := &debug.BuildInfo{Main: debug.Module{Version: main}}
			for i := 0; i+1 < len(settings); i += 2 {
				bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
			}
			return bi, true
		}
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	for _, tc := range []struct {
		name          string
		v, rev        string
		read          func() (*debug.BuildInfo, bool)
		wantV, wantRe string
	}{
		{"ldflags win", "v0.1.0", "abc123", info("v9.9.9", "vcs.revision", "fff"), "v0.1.0", "abc123"},
		{"go install @version", "", "", info("v0.2.0"), "v0.2.0", Unknown},
		{"a git checkout's build", "", "", info("v0.0.0-20260101000000-0123456789ab+dirty", "vcs.revision", "0123456789abcdef", "vcs.modified", "true"),
			"v0.0.0-20260101000000-0123456789ab+dirty", "0123456789abcdef"},
		{"go run, go test", "", "", info("(devel)"), Dev, Unknown},
		{"no build info", "", "", none, Dev, Unknown},
		{"only a version stamped", "v0.1.0", "", info("(devel)", "vcs.revision", "fff"), "v0.1.0", "fff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolve(tc.v, tc.rev, tc.read)
			require.Equal(t, Info{Version: tc.wantV, Revision: tc.wantRe, GoVersion: runtime.Version()}, got)
		})
	}
}

// make build stamps the version and revision it is given into every
// binary, and each prints them with --version. The binaries it ships
// carry no crash points: none reads POLLUX_FAULTPOINTS (internal/platform/faultpoint
// compiles them in only with the faultpoints build tag).
func TestMakeBuildStampsVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	t.Parallel()
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("make not installed")
	}
	dir := t.TempDir()
	cmd := exec.Command(mk, "-s", "build", "BIN="+dir, "VERSION=v9.8.7-test", "REVISION=0123456789abcdef")
	cmd.Dir = "../../.."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make build: %s", out)
	for _, bin := range []string{"ingest", "poller", "webhook", "pollux"} {
		cmd := exec.Command(filepath.Join(dir, bin), "--version")
		cmd.Env = append(os.Environ(), "POLLUX_CONFIG=/nonexistent") // --version reads no config
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s --version: %s", bin, out)
		require.Equal(t, bin+" v9.8.7-test (revision 0123456789abcdef, "+runtime.Version()+")", strings.TrimSpace(string(out)))
		b, err := os.ReadFile(filepath.Join(dir, bin))
		require.NoError(t, err)
		require.False(t, bytes.Contains(b, []byte(faultEnv)), "%s carries the crash points (it reads %s)", bin, faultEnv)
	}
}
