// Package custody keeps succeeded jobs' outputs before their providers
// delete them, and warns when outputs are about to expire unsaved.
//
// # What it does
//
// A route with keep_outputs has each output URL of its succeeded jobs
// copied into the object store OutputsBucket ("<prefix>-outputs"), as the
// object "<job>/<index>": streamed from the provider to JetStream in
// chunks (never the whole file in memory), refused past the route's
// max_bytes (recorded too_large, not kept), checksummed (the object
// store's SHA-256 digest, recorded with the size), downloaded through the
// route's adapter when it implements provider.OutputOpener and otherwise
// with a plain GET from the SSRF-safe client (internal/platform/safehttp: no
// loopback, private or link-local address unless allow_private). An
// output the provider answers 404 or 410 for is recorded gone; any other
// failure is retried with backoff (10 s doubling to 30 min, jittered)
// until the outputs expire (outputs_expire_at) or, when the provider
// gives no expiry, the route's horizon (24 h), and then recorded failed.
// Once every output has an outcome the job's record gets its custody
// (state.Job.Custody), written by the jobs' owner, with an outputs_saved
// event.
//
// Every succeeded job whose outputs expire, on any route, is watched: when
// its outputs are not saved (no keep_outputs, or a copy that keeps
// failing, or an output too large) an outputs_expiring event is emitted
// once, a lead time (1 h) before they expire.
//
// # Never holding up a job's end
//
// Nothing here runs before a job's terminal event: a durable consumer on
// the events stream copies each succeeded event that concerns custody to
// the work-queue stream CustodyStream, one message per job; the workers
// consume that. A restart loses nothing: the work item stays until its
// job is recorded, an object is written whole or not at all (Put writes
// its metadata last), and an output whose object exists is not downloaded
// again.
//
// Metrics: pollux_custody_outputs_total{route,outcome},
// pollux_custody_bytes_total{route}, pollux_outputs_expiring_total{route,kept}.
package custody
