// Package state is a tracked job's record and its state machine, pure: no
// I/O and no NATS, so provider adapters and tools use its types freely.
// The record is stored and changed by one owner (package jobs, which
// keeps it in a JetStream KV bucket); everyone else reads it or hands
// that owner an Observation.
//
// A job moves pending → queued → running → one of the terminal states
// (succeeded, failed, canceled, expired, lost). Queued and running may repeat
// with new progress. Terminal states absorb: once a job is terminal, no later
// observation changes it; a late terminal observation is recorded on the job
// (Late) but not applied. Observations that would move a job backwards
// (running after succeeded, queued after running) are ignored, so duplicate,
// reordered and late webhooks and polls can never regress a job. Transition
// is the rule, Apply the one function that moves a job by it.
//
// Every change to a job that other parties must hear about is appended to the
// job's outbox in the same write that makes the change: the outbox links the
// record to the events stream, so an event is never lost between the write
// and its publication. Events carry a per-job sequence number, so they are
// idempotent and ordered.
package state
