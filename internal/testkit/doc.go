// Package testkit groups test support: embedded NATS servers and clusters
// for tests (natstest), the stack a service's tests build it on (stack:
// a server, a namespace, the jobs' owner, routes over the test's
// adapters), and the end-to-end suites on real binaries and the
// harness they share (e2e, e2e/e2etest). The crash points those suites
// arm are internal/platform/faultpoint's: shipped code marks them.
//
// No shipped code imports any of it (.golangci.yml:
// test-support-stays-in-tests).
package testkit
