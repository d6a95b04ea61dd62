// Package provider defines what Pollux needs from a generation API: the
// Adapter interface (submit, status, cancel), the optional Webhooks interface
// (verify and decode deliveries), the normalized Status, and the error
// classes every adapter maps its failures to. It imports no NATS.
//
// Error classes decide what Pollux does:
//
//	Transient    5xx, timeouts, connection errors, garbage → back off, retry
//	RateLimited  429, Retry-After, throttle states          → pause the whole route
//	Auth         401/403                                    → pause the route, alert
//	Invalid      the provider refused the input             → the job fails with its reason
//	NotFound     the provider does not know the job         → reconcile, never resubmit
//
// Sub-packages hold the adapters (replicate, ...), the simulated provider
// (sim) and the shared HTTP client code (httpapi).
package provider
