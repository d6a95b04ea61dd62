// Package fleet holds the end-to-end tests of Pollux as it is deployed:
// the ingest, poller and webhook binaries run as real processes against a
// nats-server process and `pollux sim-provider`, judged by the simulated
// provider's ground truth (TestFleetOfProcesses, the running caps,
// fairness, graceful shutdown, observability with a real Prometheus, the
// permissions of deploy/nats/accounts.conf, the front door's tokens), and
// the checks of the deployment files themselves (deploy/nats, compose,
// k8s, the Helm chart, the Dockerfile).
//
// The binaries are built once for the package (e2etest.Binaries); -short
// skips the tests that need them.
package fleet
