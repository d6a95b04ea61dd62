// Package embedded runs a NATS server with JetStream inside the current
// process: the embedded default of `pollux dev`, and the server of the tests.
package embedded
