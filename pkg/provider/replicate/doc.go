// Package replicate is the adapter for Replicate's predictions API
// (https://replicate.com/docs/reference/http), and for anything that speaks
// its wire format, such as Pollux's simulated provider.
//
// Submit creates a prediction without "Prefer: wait" (Pollux never holds a
// request open), on the model route for "owner/name" or with a version for
// "owner/name:version" and bare version ids. The job's deadline becomes the
// Cancel-After header, so Replicate itself stops work Pollux no longer waits
// for. Webhooks are requested for the completed event only.
//
// Status maps starting → queued, processing → running, succeeded, failed,
// canceled, and aborted (a deadline hit before the prediction started) →
// expired. Progress is scraped from tqdm-style lines in the logs, as the
// official SDK does; created_at, started_at and completed_at are the
// provider's own times. Outputs are deleted by Replicate an hour after
// completion for API predictions, which the job records as their expiry.
//
// A 429 carries Retry-After or, failing that, the documented body "Your rate
// limit resets in ~30s"; both become the route's pause. Webhooks are signed
// with Standard Webhooks v1; the signing secret is configured or fetched
// once from /v1/webhooks/default/secret (a failed fetch is retried after
// 1 s, doubling up to 30 s, deliveries meanwhile answered 503).
//
// Replicate's prediction list shows nothing a client sent that names a
// prediction (no webhook URL, metadata or key), so the adapter cannot find
// a create whose answer was lost. With the option find_by_webhook, for an
// API whose list does show webhook URLs (Pollux's simulated provider), New
// returns a Finding, a provider.Finder that looks the job up by its
// per-job webhook URL in the attempt's window (find.go).
package replicate
