// Package runway is Pollux's Runway face: Runway's tasks API as the
// official @runwayml/sdk (4.20.1) speaks it, served below /runway/{route}
// (the SDK's baseURL is http://POLLUX/runway/{route}; its apiKey, sent as
// a Bearer token, is a Pollux token).
//
// Every request carries X-Runway-Version: 2024-11-06 (the SDK's default),
// checked as Runway checks it: missing or another version is a 400 naming
// the header.
//
//   - POST /v1/{image_to_video | text_to_video | video_to_video |
//     character_performance | video_upscale}: the JSON body (model and
//     the model's fields) is the submission's input, endpoint:model its
//     model — what Pollux's Runway adapter posts, and what any other
//     route's adapter reads as a model name. promptImage and videoUri are
//     each an https URL, a data: URI or a runwayUri the face gave
//     (uploads.go); a large data: URI and a runwayUri become the file's
//     reference. The body is at most 16 MiB; a missing model or a bad
//     input is 400 naming it.
//   - POST /v1/uploads (uploads.createEphemeral): an upload URL on the
//     front door (signed, single use, no token), which takes the SDK's
//     multipart POST of the file, and the runwayUri that names it. The answer is {id}, once the job has a record (at
//     most 5 s; then from the create: face.Kit.Created).
//   - GET /v1/tasks/{id}: the job's record as a task — pending PENDING
//     (THROTTLED when the provider said so), queued PENDING, running
//     RUNNING with progress (0 to 1), succeeded SUCCEEDED with output[]
//     (face.Kit.OutputURL each), canceled CANCELLED; failed, expired and
//     lost FAILED with failure (the record's reason) and failureCode
//     INTERNAL, INTERNAL.TIMEOUT, INTERNAL.LOST. waitForTaskOutput()
//     works unchanged: it polls every 6 ± 1.5 s, which the face answers
//     from the record, never a provider call.
//   - DELETE /v1/tasks/{id}: cancels a task under way (204; it then reads
//     CANCELLED). Pollux keeps the record of a task that has ended — its
//     history is not the app's to erase — so deleting one is 204 and
//     changes nothing; it stays readable, where Runway's would be gone.
//
// Errors are Runway's {"error": message}, a field at fault in issues
// [{path, message}]; the SDK throws its own classes by status: a bad key
// AuthenticationError (401), a read-only key PermissionDeniedError (403),
// a bad field BadRequestError (400), a task the face may not see
// NotFoundError (404), a quota RateLimitError (429, Retry-After, which
// the SDK honours). Task ids are UUIDs, derived from the route and an
// Idempotency-Key header when the create has one, so a create retried
// with it is one job; the SDK sends no key of its own and retries a
// create twice (408, 409, 429, 5xx, a lost connection).
package runway
