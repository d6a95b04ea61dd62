// Package testkit groups test support: embedded NATS servers and clusters
// for tests (natstest), the end-to-end suites on real binaries and the
// harness they share (e2e, e2e/e2etest), and the crash points those suites
// arm (faultpoint: compiled to nothing without the faultpoints build tag).
//
// No shipped code imports natstest or e2e (.golangci.yml:
// test-support-stays-in-tests).
package testkit
