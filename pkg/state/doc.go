// Package state owns a tracked job's record, its state machine and the
// JetStream KV store that holds it.
//
// A job moves pending → queued → running → one of the terminal states
// (succeeded, failed, canceled, expired, lost). Queued and running may repeat
// with new progress. Terminal states absorb: once a job is terminal, no later
// observation changes it; a late terminal observation is recorded on the job
// (Late) but not applied. Observations that would move a job backwards
// (running after succeeded, queued after running) are ignored, so duplicate,
// reordered and late webhooks and polls can never regress a job.
//
// Every change to a job that other parties must hear about is appended to the
// job's outbox in the same compare-and-set write that makes the change. The
// outbox is the transactional link between the KV record and the events
// stream: a writer publishes the outbox after its write and then clears it;
// whoever next finds a non-empty outbox (after a crash) publishes it again.
// Events carry a per-job sequence number, so they are idempotent and ordered.
//
// The Store wraps a jetstream.KeyValue bucket: Create for first writes (the
// job id is the deduplication key), Get, Update on a revision, and Mutate,
// which re-reads and retries a bounded number of times on conflict. NATS
// errors are translated at this boundary into ErrNotFound, ErrExists and
// ErrConflict.
package state
