// Package e2e holds the end-to-end tests: the real ingest, poller and
// webhook services, on an embedded NATS server or as processes against a
// nats-server, driven against the simulated provider and judged by its
// ground truth. They are three test packages, which go test runs side by
// side, each far from its timeout:
//
//   - internal/testkit/e2e itself: the whole of Pollux in the test's process, as
//     `pollux dev` runs it (e2etest.Start), on embedded servers: the job
//     lifecycle under provider faults, the provider faces polled while the
//     provider fails, provider chaos, a NATS restart, the
//     failover of a three-node cluster, restarts under acks, a
//     repartition, the report, tracking, and the client examples run
//     against it;
//   - internal/testkit/e2e/crash: the fault scenarios in which real processes are
//     SIGKILLed or stopped mid-flight (TestChaosKillProcesses, the
//     *DuringCreates tests);
//   - internal/testkit/e2e/fleet: the binaries as processes (the fleet's budgets
//     and running caps, fairness, graceful shutdown, observability,
//     permissions, the front door) and the deployment files (deploy/nats,
//     compose, k8s, Helm, the Dockerfile).
//
// What they share is internal/testkit/e2e/e2etest: the in-process stack, the
// events follower, the checks a fault scenario ends with, the binaries
// (built once per test package that runs them) and the processes.
//
// The fault scenarios are the TestChaos* tests of all three packages.
// POLLUX_CHAOS=long runs them ten times the size (make chaos).
// POLLUX_TEST_LOG=dir writes the logs of each in-process test's services
// to dir/<test>.json. A scenario whose jobs do not all finish in time
// reports up to ten of them with their record, check message and events.
package e2e
