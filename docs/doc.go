// Package docs holds Pollux's documentation pages, and the tests that keep
// what they say of the code true to it: TestWalk reads architecture.md's
// walk of one job and checks every name it gives in backticks (packages,
// files, identifiers, subjects, streams, event types, commands) against
// the source, and its closing list of the packages a job's id enters
// against their imports. (The configuration reference in
// configuration.md is generated and checked by internal/platform/config.)
//
// The package has no code of its own: it is a place for those tests,
// beside the pages they read.
package docs
