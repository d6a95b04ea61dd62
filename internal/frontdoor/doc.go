// Package frontdoor is Pollux's HTTP front door, for callers without a NATS
// client: it turns HTTP requests into the same intake messages any NATS
// client publishes, reads job records from the jobs bucket, and streams a
// job's events from the events stream as Server-Sent Events. It is a client
// of the v1 contract (package events), not a second way in: everything it
// accepts is validated by the contract's decoders and handled by ingest.
//
//	POST /v1/jobs                 submit: {"route": ..., plus the fields of a submission}; 202
//	GET  /v1/jobs/{id}            the job's record (its snapshot, as events carry it)
//	POST /v1/jobs/{id}/cancel     cancel: {"reason"?}; 202
//	GET  /v1/jobs/{id}/events     the job's events from its first, as text/event-stream, until the terminal one
//
// Every error is a JSON body {"error":{"code","message","field"?}} whose
// code is one of the Code constants; api/openapi.yaml describes it all.
//
// A job id is known when POST /v1/jobs answers: the id given, else the one
// derived from the idempotency key (the body's idempotency_key or the
// Idempotency-Key header, which must agree), else a random one the front
// door assigns. The front door has no authentication of its own: serve it
// on a private network or behind a gateway that authenticates.
package frontdoor
