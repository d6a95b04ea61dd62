// Package replicate is Pollux's Replicate face: Replicate's predictions
// API, so an application written against Replicate's SDK (replicate on
// npm, 1.4.0 read) runs its predictions through Pollux by changing its
// base URL to http://POLLUX/replicate/{route}/v1 and its token to a
// Pollux token.
//
// It serves POST /v1/predictions (a version), POST
// /v1/models/{owner}/{name}/predictions, GET /v1/predictions (the face's
// predictions, newest first), GET /v1/predictions/{id}, POST
// /v1/predictions/{id}/cancel and GET /outputs/{id}/{n} (a kept output,
// face.OutputPath), and the files API (files.go: POST, GET and DELETE
// /v1/files, the file's urls.get in an input mapped to its reference);
// every other path (deployments, trainings) is answered 404. A create is a
// Pollux submission on the mount's route — the model (owner/name) or the
// version is the job's model, the input its input — answered once the
// job's record exists (at most RecordWait), so a get that follows never
// finds it missing. Prefer: wait[=n] holds the answer until the job ends
// or n seconds (at most 60, a bare "wait" 60) pass, watching the jobs
// index. A get and a cancel are answered from the job's record: no
// request reaches the provider, however often the SDK polls.
//
// What it decided, from the SDK's source:
//
//   - Statuses: pending and queued are starting, running processing,
//     succeeded succeeded, canceled canceled, and failed, expired and
//     lost are failed with the reason as error. Never "aborted": wait()
//     polls it forever. A create answers any unfinished job as starting,
//     since run() returns the output of any other answer at once (null
//     for processing) instead of polling.
//   - Ids are 26 characters of lowercase base32, derived from the route
//     and the Idempotency-Key when the create carries one (the SDK sends
//     none; a custom fetch can), so a retried create is one job.
//   - output is the record's output URLs as face.Kit.OutputURL gives
//     them — Pollux's own on the face (GET /outputs/{id}/{n}, served
//     here) for an output the route keeps, else the provider's when it
//     is a safe http(s) URL — one as a string, as video models answer;
//     several as an array; null until success. logs says
//     why a job waits, its queue position and its progress as a tqdm bar
//     (which the SDK's parseProgressFromLogs reads); metrics has
//     predict_time and total_time once the job has ended; input is the
//     record's when the route keeps inputs (else the create's, on the
//     create's answer, and {}); urls has get and cancel, never stream.
//   - A create may name a webhook and webhook_events_filter (start,
//     output, logs, completed; all when none) where the configuration
//     sets notify.submissions: the URL must be https (http only to a
//     loopback host) and not a private address unless allow_private
//     (safehttp.CheckURL). Package notify delivers the prediction
//     (faceshape) signed as Replicate signs, with the caller's secret,
//     which GET /v1/webhooks/default/secret answers (webhook.go).
//   - Errors are Replicate's problem bodies ({title, detail, status}, a
//     field at fault in invalid_fields): 401, 403 and 429 (with
//     Retry-After) from the front door, 404 for a prediction the face may
//     not see (face.Kit.Job: an unknown id, after the wait for a record
//     still to come, another route's job, one the face did not make),
//     409 with Retry-After for a cancel of a create not taken yet, 400
//     for a body that is not a JSON object or a
//     bad Prefer, 422 naming the field at fault, 413 beyond face.MaxDataBody, 503
//     (Retry-After 1) when NATS is unavailable — but for a get of a
//     prediction this process knows, answered through the outage as it
//     last knew it, never as ended from what may be stale
//     (face.Kit.Poll).
package replicate
