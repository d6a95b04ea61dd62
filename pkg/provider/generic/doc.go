// Package generic is a provider adapter configured without code, for the
// many video APIs that are "POST → id, GET /…/{id} → status string": Luma,
// Kling, MiniMax, Seedance, Wan (DashScope) and the OpenAI-style video API
// (/v1/videos) ship as working examples in the examples directory, each
// tested against a fake that replays the provider's documented values.
//
// Options (YAML or JSON, read strictly: an unknown field is named) say:
//
//   - how to submit: method, path (with {model} and {endpoint}), whether the
//     input is the body or sits under input_field, the body field that gets
//     the model, extra headers (DashScope's X-DashScope-Async), and the JSON
//     path of the new job's id;
//   - how to read a job: method, path (with {id}, {model}, {endpoint}), and
//     JSON paths to the raw status, progress, failure reason, outputs and
//     the provider's created/started/completed times (RFC 3339, Unix seconds
//     or milliseconds, or a Go layout), the outputs' expiry time
//     (expires_at_path: a job read after it is expired), and a request
//     path that is a succeeded job's output when the answer names none
//     (output_path, OpenAI's /videos/{id}/content);
//   - the state map, raw value → queued, running, succeeded, failed,
//     canceled, expired, unknown, or not_found (the provider does not know
//     the job, as DashScope's UNKNOWN says: the not-found class, which
//     Pollux reconciles). Values not in the map are unknown and never
//     terminal;
//   - an optional follow-up call made once a job succeeded, filled from its
//     status answer, whose answer holds the outputs (MiniMax's
//     files/retrieve for the download URL);
//   - an optional cancel call (absent: Info().Cancel is false). Cancel reads
//     the job first and leaves a finished job alone, as some providers'
//     cancel call deletes finished jobs with their outputs;
//   - errors reported inside 2xx answers (MiniMax's base_resp.status_code),
//     code → transient, rate_limited, auth, invalid, not_found, or failed
//     (invalid input at submit, a failed job at status);
//   - the poll floor, the outputs' lifetime, what a 404 means (not_found by
//     default, or expired), and a cache-busting query parameter for
//     gateways that cache GETs.
//
// JSON paths are a small dotted language, a.b[0].c with [*] for every
// element (see Path). A job's model is "<endpoint>:<model>" or "<model>",
// the endpoint then being Options.DefaultEndpoint; placeholder values must
// be plain tokens (letters, digits, '.', '_', ':', '-'), and are escaped for
// where they stand, so neither a job nor a provider answer can change the
// path's shape.
//
// Auth is one header (default "Authorization: Bearer <token>"). For Kling
// the adapter mints an HS256 JWT per call (iss = access key, nbf 5 s back,
// exp after the configured TTL) from a token "<access key>:<secret key>",
// since a pre-minted token would expire half an hour after Pollux read it.
//
// Outputs expire at the time the answer gives (status.expires_at_path),
// else Options.OutputsTTL after the provider's completion time, else its
// creation time (earlier, so never late), else the time Pollux read the
// answer. Success needs a URL only where the provider's answer has one: a
// succeeded job without outputs stays succeeded.
//
// Callbacks (Options.Callback) are hints whatever their signing: a callback
// names the job (id_path) and Pollux checks it now with a status call;
// nothing in its body changes a job. Unsigned ones (Luma, Kling, Seedance)
// are Callbacks, guarded by the per-job token of their URL. Signed ones
// (signature: standard_webhooks, OpenAI's video.completed and video.failed,
// whose body carries only the video's id) are Webhooks: verified with the
// route's whsec_ secret before anything reads them (a forged one is
// refused), deduplicated on webhook-id, and then a hint, as ParseWebhook
// reports the job with an unknown state. Pollux finds a delivery's job by
// the job in its URL; where the provider's endpoint is configured once per
// account, not per job (url_field unset), Info.WebhooksByRemoteID has
// Pollux keep an index from remote ids to jobs and route by the body's id.
//
// What this adapter does not do: idempotency keys (a create is never
// repeated), request bodies beyond "input object (+ model field)", and
// times in zone-less local formats other than UTC.
package generic
