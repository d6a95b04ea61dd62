// Package atlas is the adapter for Atlas Cloud's media generation API
// (https://www.atlascloud.ai/docs), an aggregator serving Kling, Seedance,
// Wan, Hailuo, Veo, Vidu, Luma, PixVerse and more behind one API. The
// facts and their sources are in the project's provider notes
// (shared/providers-atlas.md); its doc pages disagree with each other,
// and where they do this adapter reads every documented shape and says
// below which it relies on.
//
// Submit posts the job's input object, with "model" set to the job's
// model, to https://api.atlascloud.ai/api/v1/model/generateVideo
// ("Authorization: Bearer <key>"). A model may name its media first:
// "image:<id>" posts to generateImage and "audio:<id>" to generateAudio,
// which take the same shape; a bare id goes to Options.Media (video by
// default). An input naming another model is refused. The prediction id
// is read at data.id (the current docs and the official MCP server), else
// data.predictionId or a top-level id (older pages). Retention is set per
// route: Options.ObjectExpirationHours becomes
// X-AtlasCloud-Object-Expiration-Hours and Options.RequestRetentionHours
// X-AtlasCloud-Request-Retention-Hours, and both are kept with the job
// (RefData) so its expiry follows what it was submitted with. With
// Options.ValidateModels the model id is checked against the published
// list (GET /api/v1/models, cached for Options.ModelsTTL, a miss
// refreshing it at most once a minute) before the billable call; without
// a list the call goes ahead and Atlas Cloud's own 404 answers. A POST is
// never repeated: Atlas Cloud takes no idempotency key, and its own client
// never retries one ("may create billable tasks").
//
// Status is GET /api/v1/model/prediction/{id}, whose prediction sits under
// data (the current shape) or at the top level (older pages). The status
// values are not the same on every page, so every documented one is
// mapped, case aside: starting → queued (the MCP server's wording);
// processing → running; completed and succeeded (the predictions page and
// the model pages disagree) → succeeded; failed → failed; timeout →
// failed; cancelled or canceled → canceled (the last two only in
// webhook payloads [3p]). Any other value is unknown: never terminal, the
// job is polled on as before, and the adapter logs a warning naming the
// value, which is how every adapter here treats values it does not know.
// A failure comes back with HTTP 200: an error_code (1039: the input was
// rejected by moderation) with error, which makes the job failed with
// "<error> (code N)"; without outputs, the code alone makes it failed when
// the status is missing, unknown or says success.
// An error envelope ({code, msg, data: null}) inside a 200 is classified
// by its code as if it were the HTTP status.
//
// Outputs are outputs (a list of URLs) or output (one URL), both
// documented. Atlas Cloud keeps media 14 days, or the hours the submit
// asked for, after which their URLs answer 404: OutputsExpireAt is the
// completion time (else the creation time, else now) plus that, and a
// prediction read after its outputs expired is expired, not succeeded. A
// prediction unknown to Atlas Cloud (404) after the job's request
// retention passed is expired; otherwise 404 is the not-found class, which
// Pollux reconciles.
//
// Webhooks: Submit passes the job's webhook URL as webhook_url, and Atlas
// Cloud sends one POST when the prediction ends, signed with Ed25519 over
// timestamp.body under a key of its JWKS
// (https://api.atlascloud.ai/api/v1/webhooks/jwks.json), verified by
// signature.AtlasVerifier: keys cached, an unknown key id refreshing them
// at most once a minute. These signing details come from third-party
// integrations that agree with each other [3p-consistent]. A verified
// delivery is applied like a poll's answer (its session_id, else data.id,
// names the prediction; its payload or data holds it; a top-level ERROR is
// a failure). A delivery that is unsigned or cannot be verified (forged,
// stale, an unknown key, the JWKS unreachable) is never applied: it is
// taken as a hint, with a delivery id of its own content, and its only
// effect is that Pollux checks the job now. Polling goes on either way:
// "webhooks complement polling".
//
// Not offered, because not documented: cancel (no endpoint found),
// idempotency, poll-after or rate-limit headers (Atlas Cloud says it
// sends none), and a progress or queue position. 402 (insufficient
// balance) pauses the route like a refused key; 401 also answers a
// wrong path (auth runs before routing).
package atlas
