// Package testkit groups test support: embedded NATS servers and clusters
// for tests (natstest), the stack a service's tests build it on (stack:
// a server, a namespace, the jobs' owner, routes over the test's
// adapters), the end-to-end suites on real binaries and the
// harness they share (e2e, e2e/e2etest), and the crash points those suites
// arm (faultpoint: compiled to nothing without the faultpoints build tag).
//
// No shipped code imports natstest, stack or e2e (.golangci.yml:
// test-support-stays-in-tests).
package testkit
