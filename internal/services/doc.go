// Package services groups the long-running services, one per concern,
// each a Config, New and Run(ctx): ingest (cmd/ingest: submissions, track
// and cancel requests), poller (cmd/poller: one check per job), webhook
// (cmd/webhook: verified provider deliveries), custody (outputs copied
// before the provider deletes them) and notify (signed outbound webhooks).
// Each observes and decides, hands its decisions to the job core's owner
// (core/jobs) and calls providers only through the route's gate
// (core/route).
//
// Services import the core, the platform and pkg/* — never each other, the
// edge, the wiring or the tools (.golangci.yml: services-import-no-edge and
// the per-service rules).
package services
