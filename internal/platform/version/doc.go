// Package version says which build of Pollux a binary is: its version and
// the revision it was built from, stamped at link time by the Makefile and
// the Dockerfile (make build, make image):
//
//	go build -ldflags "-X github.com/pollux-dev/pollux/internal/platform/version.version=v0.1.0 \
//	    -X github.com/pollux-dev/pollux/internal/platform/version.revision=$(git rev-parse HEAD)" ./cmd/...
//
// A binary built without them (go build, go run, go install) falls back on
// what the Go toolchain recorded (runtime/debug.ReadBuildInfo): the module
// version of a `go install ...@v0.1.0`, the VCS revision of a build in a
// git checkout, else "dev" and "unknown". Every binary prints it with
// --version, and every process exports it as the pollux_build_info gauge
// (internal/wiring/metrics).
package version
