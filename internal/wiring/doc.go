// Package wiring groups what turns the parts into processes: the
// environment a binary opens from its flags and config file — NATS, the
// streams, the routes and their gates, the owner, the front door (app) —
// and the Prometheus implementations of every part's metric hooks
// (metrics). cmd/* and the tools use it; nothing beneath it does.
package wiring
