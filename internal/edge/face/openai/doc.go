// Package openai is Pollux's OpenAI face: OpenAI's videos API, as the
// official openai SDK (openai@7.59.0, client.videos) speaks it, served
// below /openai/{route} (the SDK's baseURL is http://POLLUX/openai/{route}/v1).
//
//   - POST /v1/videos: a multipart form (prompt, model, seconds, size,
//     input_reference) becomes a Pollux submission on the route: model is
//     the submission's model (default sora-2; it passes to the route's
//     provider as is), {prompt, seconds, size, input_reference} its input.
//     An uploaded input_reference (JPEG, PNG or WebP) streams into
//     Pollux's inputs bucket (face.Files), and the input names it by
//     reference, within the files' limits (413, param input_reference);
//     where Pollux keeps no files it travels inside the submission as a
//     data: URI, at most 128 KiB, in a body of at most 192 KiB (413).
//     input_reference[file_id] (OpenAI's files API) is refused. Unknown
//     fields, repeated fields and bad values are 400
//     invalid_request_error naming the field (param). The create answers once the job has a
//     record (it waits, at most 10 s, for ingest to take the durable
//     submission, so the app's first retrieve finds it); a record still
//     absent then is answered queued from what was submitted, and so is
//     a retrieve of it by this gateway until the record exists
//     (face.Kit.Created).
//   - GET /v1/videos/{id}: the job's record as a video. Pollux's states
//     map to OpenAI's: pending and queued are queued, running in_progress,
//     succeeded completed; failed, canceled, expired and lost are failed,
//     with error.code video_generation_failed, video_canceled,
//     video_expired or video_lost and the record's reason.
//   - GET /v1/videos/{id}/content: the bytes output custody kept when the
//     route keeps outputs, else a 302 to the provider's URL (the SDK's
//     fetch follows it). variant=thumbnail and spritesheet are 404:
//     Pollux has neither. A video not completed is 404 video_not_ready.
//   - DELETE /v1/videos/{id}: cancels a video still being made (deleted:
//     true; it then ends failed, video_canceled). Pollux keeps the record
//     of a video that ended — its history is not the app's to erase — so
//     a delete of one answers deleted: false (true for a canceled one, so
//     a retried delete says the same).
//   - GET /v1/videos: the videos this face made on the route, newest
//     first, from the front door's jobs index (limit 1 to 100, default
//     20; after a video id; has_more), so the SDK's list() and its
//     auto-pagination work. Videos are not an app's: every token of the
//     front door lists every video of the route, as GET /v1/jobs does.
//     order=asc is 400 (newest first only).
//
// Every video answer carries openai-poll-after-ms: until Pollux's own next
// check of the job (face.PollAfter), 1 to 10 s — the interval the SDK's
// poll helpers sleep. While NATS is unavailable a retrieve of a video
// this process knows is answered as it last knew it (never completed or
// failed from what may be stale: face.Kit.Poll), its hint at least 5 s
// (face.OutagePollAfter); anything else is a 503 with Retry-After. Errors are OpenAI's {"error": {message, type,
// param, code}}: a bad token 401 invalid_api_key, a read-only token 403,
// a video the face may not see 404 video_not_found (face.Kit.Job: an
// unknown id, another route's job, one the face did not make — a delete
// of one cancels nothing), a delete of a video not taken yet 409 with
// Retry-After, an exceeded quota 429 with Retry-After and retry-after-ms
// (which the SDK honours).
//
// Ids are video_ and 32 hex digits: derived from the route and the
// request's Idempotency-Key header when it has one (face.IDBytes), so a
// create retried with the key is one job, and random otherwise. The SDK
// retries a create up to twice (408, 409, 429, 5xx, a lost connection)
// and sends no key of its own — its idempotencyKey request option sends
// nothing, as the OpenAI client names no idempotency header — so an app
// that wants a retried create to stay one job passes
// headers: {'Idempotency-Key': …}.
package openai
