//go:build !faultpoints

package faultpoint

// Enabled reports whether this build has the crash points.
const Enabled = false

// Hit does nothing: this build has no crash points (see the package doc).
func Hit(string) {}
