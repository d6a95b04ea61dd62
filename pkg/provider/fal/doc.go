// Package fal is the adapter for fal.ai's queue API
// (https://docs.fal.ai/model-apis/model-endpoints/queue).
//
// Submit posts the input to https://queue.fal.run/{model_id}[/{subpath}]
// with "Authorization: Key <token>". The job's deadline becomes
// X-Fal-Request-Timeout, in whole seconds: fal's deadline for the request
// to start, which is the latest a job that must finish by the deadline can
// start. A webhook, when asked for, is the fal_webhook query parameter.
// The request_id is the remote id; the status_url, response_url and
// cancel_url fal returns are kept as the job's RefData and used for every
// later call. They are trusted only when they are https URLs on the
// configured queue host and name the request, so a response cannot send
// Pollux's key elsewhere; redirects are not followed. A job without them
// (tracked, or refused by that check) is reached through the documented
// pattern {base}/{owner}/{app}/requests/{id}[/status|/cancel], which uses
// owner/app only, never the model's subpath.
//
// Status maps IN_QUEUE → queued (queue_position, which counts the requests
// ahead, becomes the 1-based QueuePosition: 1 is next to start) and
// IN_PROGRESS → running. HTTP 202 (in queue or progress) and 200
// (completed) are both answers. COMPLETED alone is not success: COMPLETED
// with error or error_type is failed with that reason, and COMPLETED without
// either is confirmed by fetching the result from response_url, whose
// http(s) URLs (video.url, say) are the outputs. A result answering 504 with
// X-Fal-Request-Timeout-Type: user means the start deadline passed: expired.
// A result refused as invalid (422, the model's validation errors) is
// failed with fal's detail. FAILED and CANCELED are not in fal's SDK; a
// third-party schema lists them [unconfirmed], and they map to failed and
// canceled. Any other value is unknown and never terminal.
//
// Cancel is PUT cancel_url: OK (removed from the queue) is canceled;
// CANCELLATION_REQUESTED (202, the running app was signalled and decides)
// is not final, so Cancel answers unknown and Pollux polls for the outcome;
// ALREADY_COMPLETED (400) answers the job's current status; NOT_FOUND (404)
// is the not-found class, which Pollux reconciles. fal reports a running
// request that stops on the signal as COMPLETED with its error, and Pollux
// records what fal reports.
//
// Webhooks (Options.UserID set) are verified with signature.FalVerifier:
// ed25519 over request id, user id, timestamp and the body's SHA-256, with
// keys from fal's JWKS. The delivery id is request_id + ":" + status, as fal
// sends no per-delivery id. status OK is succeeded with the payload's URLs;
// OK with a payload_error (the result could not be attached) is left
// unknown so a poll fetches it; ERROR is failed with fal's error.
//
// fal documents no retention period for outputs on its CDN, so
// OutputsExpireAt stays zero. fal has no idempotency key and no poll
// interval hint. Its rate limit is on concurrency: requests over the cap
// wait IN_QUEUE rather than being refused, while a 429 still pauses the
// route.
package fal
