// Package e2e holds the end-to-end tests: the real ingest, poller and
// webhook services on an embedded NATS server against the simulated
// provider, judged by the simulator's ground truth.
package e2e
