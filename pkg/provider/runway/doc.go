// Package runway is the adapter for Runway's tasks API
// (https://docs.dev.runwayml.com), as the official SDK (runwayml/sdk-python)
// speaks it: https://api.dev.runwayml.com, "Authorization: Bearer <key>",
// and the X-Runway-Version header (2024-11-06 unless the options say
// otherwise).
//
// A job's model names the generation endpoint and the model:
// "image_to_video:gen4_turbo" posts to /v1/image_to_video, and a bare
// "gen4_turbo" posts to Options.Endpoint (default image_to_video). The body
// is the job's input object with "model" set to the model, which is how
// every Runway create endpoint takes it; an input that names another model
// is refused. The answer is the task's id, the remote id.
//
// Status is GET /v1/tasks/{id}: PENDING → queued, THROTTLED → queued (the
// task was accepted and waits for a concurrency slot of the account's tier;
// this is not a rate limit, and the raw value is kept to tell the two
// apart), RUNNING → running with its progress (0 to 1), SUCCEEDED →
// succeeded with the output URLs, FAILED → failed with failure and
// failureCode, CANCELLED → canceled. Anything else is unknown, never
// terminal. Output URLs "expire within 24-48 hours" (SDK docstring):
// OutputsExpireAt is the task's createdAt plus 24 hours, the earliest the
// outputs can go.
//
// Runway asks for no updates more often than every five seconds (SDK
// docstring of tasks), which is Info().PollFloor. It sends no webhooks and
// takes no idempotency key.
//
// Cancel is DELETE /v1/tasks/{id} (204), which cancels a pending, throttled
// or running task but deletes any other, outputs included. Cancel therefore
// reads the task first and returns a finished task's status untouched; only
// an unfinished one is deleted, and it is then canceled. A deleted task
// answers 404 afterwards [unconfirmed], the not-found class.
//
// HTTP errors are classified by httpapi: 429 (a create over the tier's
// limits) pauses the route, 401/403 pause it and alert, 400 fails the job
// with Runway's error text, 404 reconciles.
package runway
