// Package luma is Pollux's Luma face: Luma's Dream Machine generations API
// as the official lumaai SDK (1.19.1) speaks it, served below
// /luma/{route} (the SDK's baseURL is http://POLLUX/luma/{route}; its
// authToken, sent as a Bearer token, is a Pollux token).
//
//   - POST /generations/video and POST /generations/image: the JSON body
//     (model, prompt, keyframes, aspect_ratio, …) is the submission's
//     input, its model the submission's model. A missing model, a body
//     with neither prompt nor keyframes, bad keyframes (inputs.go: frame0
//     and frame1, each an image by https URL or data: URI, or a
//     generation by id) and a callback_url Pollux would not call are
//     422s naming the field; the body is at most 16 MiB, a large data:
//     URI kept as an input file (face.Kit.DataRefs) so the submission
//     names it by reference. The answer (201) is the generation, queued,
//     once the job has a record (at most 5 s; then from the create).
//   - callback_url (callback.go): the job's own webhook; the outbound
//     webhook service POSTs the generation (faceshape.LumaGenerationOf,
//     the one rendering the face answers with) on each change of its
//     state, the end last. Luma signs nothing.
//   - GET /generations/{id}: the job's record as a generation — pending
//     and queued queued, running dreaming, succeeded completed with
//     assets.video (assets.image for an image; face.Kit.OutputURL),
//     failed, canceled, expired and lost failed with failure_reason (the
//     record's reason). request is the create's body when the route keeps
//     inputs.
//   - GET /generations?limit&offset: the generations this face made on the
//     route, newest first (limit 1 to 100, default 10; offset at most
//     10,000), with count and has_more. Generations are not an app's:
//     every token lists every generation of the route, as GET /v1/jobs
//     does.
//   - DELETE /generations/{id}: cancels a generation under way (204; it
//     then reads failed). Pollux keeps the record of one that has ended,
//     so deleting one is 204 and changes nothing.
//
// The SDK reads no poll hint (apps loop on generations.get). Errors are
// Luma's {"detail": message}, a field at fault {"detail": [{loc, msg,
// type}]} with 422; the SDK throws its own classes by status: a bad key
// AuthenticationError (401), a read-only key PermissionDeniedError (403),
// a bad field UnprocessableEntityError (422), an unknown generation
// NotFoundError (404), a quota RateLimitError (429, Retry-After, which the
// SDK honours). Generation ids are UUIDs, derived from the route and an
// Idempotency-Key header when the create has one, so a create retried
// with it is one job.
package luma
