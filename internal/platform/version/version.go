package version

import (
	"cmp"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
)

// Set with -ldflags -X (see the package comment); empty when not set.
var (
	version  string
	revision string
)

// Dev and Unknown are the version and the revision of a build that says
// nothing about itself.
const (
	Dev     = "dev"
	Unknown = "unknown"
)

// Info is what a build says about itself.
type Info struct {
	// Version is the release (git describe: v0.1.0, v0.1.0-3-gabc1234,
	// with -dirty for uncommitted changes), else Dev.
	Version string
	// Revision is the commit built from, else Unknown.
	Revision string
	// GoVersion is the Go toolchain that built it (runtime.Version).
	GoVersion string
}

// Get returns the build's version facts.
func Get() Info { return get() }

var get = sync.OnceValue(func() Info { return resolve(version, revision, debug.ReadBuildInfo) })

// resolve prefers the link-time values, then the toolchain's build info.
func resolve(v, rev string, read func() (*debug.BuildInfo, bool)) Info {
	if bi, ok := read(); ok {
		if mv := bi.Main.Version; v == "" && mv != "(devel)" {
			v = mv // a go install ...@v0.1.0, or Go's pseudo-version of a checkout (+dirty when modified)
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && rev == "" {
				rev = s.Value
			}
		}
	}
	return Info{Version: cmp.Or(v, Dev), Revision: cmp.Or(rev, Unknown), GoVersion: runtime.Version()}
}

// String is the line --version prints: "poller v0.1.0 (revision 1a2b3c…, go1.26.8)".
func String(binary string) string {
	i := Get()
	return fmt.Sprintf("%s %s (revision %s, %s)", binary, i.Version, i.Revision, i.GoVersion)
}
