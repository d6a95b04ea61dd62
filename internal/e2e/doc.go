// Package e2e holds the end-to-end tests: the real ingest, poller and
// webhook services on an embedded NATS server against the simulated
// provider, judged by the simulator's ground truth.
//
// POLLUX_CHAOS=long runs the fault scenarios ten times the size (make
// chaos). POLLUX_TEST_LOG=dir writes the logs of each test's services to
// dir/<test>.json. A scenario whose jobs do not all finish in time reports
// up to ten of them with their record, check message and events.
package e2e
