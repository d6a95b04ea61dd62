// Package fal is Pollux's fal face: fal's queue API, served through the
// fal client's proxy protocol, so an app written against @fal-ai/client
// works against Pollux with
//
//	fal.config({credentials: POLLUX_TOKEN, proxyUrl: {url: "http://POLLUX/fal/{route}/", when: "always"}})
//
// The client then sends every request to that one URL with the URL it
// meant in the x-fal-target-url header; the face dispatches on it:
//
//   - POST https://rest.fal.ai/storage/upload/initiate (the client's
//     upload of a Blob input) is answered with an upload_url on the front
//     door, signed, expiring and single-use, which the client's plain PUT
//     reaches, and a file_url on the face (GET files/{id}), which a
//     submit's input maps to the file's reference (storage.go).
//   - POST https://queue.fal.run/{owner}/{app}[/{path}] (submit) is a
//     Pollux submission on the face's route whose model is the endpoint id
//     ({owner}/{app}[/{path}], with a workflows/ or comfy/ namespace when
//     it has one) and whose input is the body (a JSON object; none is {}).
//     It is answered once durable, with fal's {request_id, response_url,
//     status_url, cancel_url, status: IN_QUEUE, queue_position}: the
//     request id is the job id, a version 4 UUID from face.IDBytes, so an
//     Idempotency-Key header (the client's submit takes headers) makes a
//     retried submit one job; the URLs are the ones the client builds.
//   - GET …/{owner}/{app}/requests/{id}/status[?logs=1] answers from the
//     job's record: IN_QUEUE (with queue_position, 0-based) until the
//     provider runs it, IN_PROGRESS while it runs, COMPLETED once it has
//     ended whatever the outcome (with metrics.inference_time when known,
//     and error and error_type when it did not succeed), 202 before
//     COMPLETED and 200 after, as fal answers. The client polls until
//     COMPLETED and then asks for the result, so that is where a failure
//     reaches the app.
//   - GET …/requests/{id} (result): a succeeded job's outputs as fal's
//     File objects — {"video": {url, content_type, file_name}} for the
//     first output that is not an image, "images" for those that are, and
//     "files" for all, in order (Pollux records outputs as URLs, not the
//     provider's JSON), each url as face.Kit.OutputURL gives it (Pollux's
//     own, GET /fal/{route}/outputs/{id}/{n}, served beside the proxy, for
//     an output the route keeps; else the provider's when it is a safe
//     http(s) URL) — or fal's error for one that ended otherwise (see
//     failureOf: 422 validation error, 500, 499 client_cancelled, 504
//     request_timeout of the user's kind, none of which the client
//     retries).
//   - PUT …/requests/{id}/cancel asks Pollux to cancel: 202
//     CANCELLATION_REQUESTED, or 400 ALREADY_COMPLETED once the job has
//     ended, 404 NOT_FOUND for an unknown id.
//
// Pollux is never an open proxy: it fetches nothing and forwards nothing,
// and a target is served only when it is https://queue.fal.run/ with a
// path of plain segments. Any other host — fal.run (fal.run()),
// rest.fal.ai (storage uploads, tokens), a look-alike, an IP — and any
// other scheme, a port, userinfo, percent-encoding, dot or empty
// segments are refused with 412, as fal's own proxies refuse a foreign
// target; a missing header is a 400.
//
// A request id is served only for a job the face may see (face.Kit.Job:
// one this face created on its route, or through its model route), for
// the app the URL names (its metadata fal_app); any other is the same
// 404 as an unknown id. A request id Pollux has no record of yet is
// waited for (the mount's RecordGrace, 3 s) before the 404: ingest takes a
// submission within milliseconds of its answer, and the client asks for
// its status at once.
//
// Errors are fal's shape, {"detail": "..."} (plus "message", which the
// client makes its error's message of); a field at fault is a 422 whose
// detail lists it as FastAPI does ({loc, msg, type}), which the client
// throws as a ValidationError. The front door's own refusals come here
// too: 401, 403, 429 and 503 with Retry-After. While NATS is
// unavailable a status of a request this process knows is answered as it
// last knew it (IN_QUEUE or IN_PROGRESS, never COMPLETED from what may be
// stale: face.Kit.Poll), and a result of one it last knew COMPLETED from
// that record; anything else is the 503.
//
// A submit's fal_webhook (the client's webhookUrl) is checked before
// anything else (webhook.go: https beyond loopback, no private address
// unless allowed, once, and only where notify.submissions is configured;
// fal's 422 on ["query", "fal_webhook"] otherwise) and becomes the job's
// notify_url, with the face's URL in its metadata; the answer carries
// gateway_request_id. Package notify delivers fal's webhook body once, at
// the job's end (faceshape.FalWebhookBody: the result call's payload, or
// its error body), signed as fal signs by Pollux's key, whose JWKS the
// front door serves at /fal/.well-known/jwks.json; the user id is the
// job's app.
//
// Decided where fal is silent or Pollux differs: x-fal-request-timeout,
// x-fal-queue-priority and x-fal-runner-hint are ignored (Pollux's
// schedule and the route's deadline rule); status streaming
// (…/status/stream) is an event stream of the statuses a poll would
// answer, from the job's records, ending after COMPLETED (stream.go);
// logs=1 gives [] plus a line saying what a job not yet submitted
// waits for.
package fal
