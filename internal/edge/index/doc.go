// Package index is the jobs index: an in-memory list of the jobs in the
// events stream (POLLUX_EVENTS), with counts per route and state and the
// last hour's activity, that the console and the API page through without
// reading the jobs bucket.
//
// # Decision: derived state
//
// The list must stay fast at 100,000 tracked jobs, and no page may scan
// the jobs KV bucket (a bucket has no order and no secondary keys; listing
// it reads every record). Every job transition is already an event in the
// durable events stream carrying the job's snapshot and a per-job Seq, so
// the index is derived from it:
//
//   - Each process that serves the console or the API holds its own
//     index, fed by an ordered consumer (Run) from the stream's first
//     message. Nothing is written to build it: zero extra writes per job,
//     no new stream, bucket or durable consumer.
//   - It is rebuilt by replay. After a crash or a restart the process
//     reads the stream again and has the same index; after a NATS restart
//     Run resumes from the message after the last it applied. An event is
//     applied only when its Seq is greater than the one held for its job,
//     so duplicates, redeliveries and replays change nothing.
//   - Entries are small (the fields lists filter and show: about 550
//     bytes of heap a job, measured) and ordered by creation time then id
//     in sorted slices: every job, each route's, each state's, and each
//     route and state's, so a page filtered by route and state walks only
//     matching jobs. Events arrive nearly in creation order, so adding a
//     job is almost always an append, and a page is a binary search for
//     the cursor then a backward walk (a tree would make the rare insert
//     in the middle cheaper and every walk slower; the slices need no
//     dependency). A job that changes state is marked out of its old
//     state's lists, compacted later, and enters the new ones, usually at
//     their end. Exact-match maps find a job by id, idempotency key or
//     remote id; the counts per route and state are the lists' sizes.
//   - A page's Total comes from running counts when the query filters by
//     route, states and model; from the bounds of a binary search for a
//     time range alone; otherwise from a walk that stops at TotalCap
//     (TotalCapped).
//   - Replay decodes only the fields the index keeps (segmentio's decoder,
//     as events.DecodeCheck), about 5 µs an event.
//
// `pollux bench --only index` measures it with 100,000 jobs (270,000
// events): a page filtered by route and state in 10-35 µs (p50), a
// search in about 3 µs, about 550 bytes of heap a job, 0 writes. The
// replay took 6-7.5 s of CPU (most of it reading from NATS), 9-23 s of
// wall time on a 2-CPU machine at load averages of 13-19.
//
// # What is not listed, and why
//
//   - Jobs waiting before their submission — held while their route is
//     paused, waiting for running slots — are listed from their waiting
//     event (pending, with waiting_for), and counted by what they wait
//     for (Waiting). Intake a route's ingest has not taken yet is not a
//     job: the census counts it (intake).
//   - Jobs whose events aged out of the stream (events_max_age, default 7
//     days) are not replayed, so a process started later does not list
//     them; a long-running one keeps them until MaxJobs forgets the oldest
//     terminal jobs.
//   - Beyond MaxJobs (default 1,000,000) the oldest terminal jobs are
//     forgotten first; a job not yet ended is never forgotten.
//
// Rejected intake messages are listed as entries marked Rejected (without
// a state) under the id their rejection names, unless a job of that id
// exists. Route events (pause, resume) are not jobs: the last 50 of each
// route are kept for RouteEvents. Any other message on the events
// subjects is ignored, counted (Garbage) and logged at debug level.
//
// Activity counts, per minute of the last hour, the jobs whose terminal
// event falls in it (each job's end once; a late poll's event is not a
// second end) with state.Tally, as `pollux stats` counts them: the jobs
// ended and their polls, the completions (succeeded or failed) that
// polls per completion divides those polls by, how many of those
// expecting a webhook a webhook told first (DetectedBy), and the
// completions' detection delay (DetectedAt - CompletedAt). A process started
// mid-hour has the hour's figures from the replay.
//
// Subscribe is a bounded broadcast of changed entries for live lists: a
// subscriber whose buffer is full loses updates, and the index never
// waits. Each entry knows the events stream's sequence of its change
// (Entry.Stream), so a list that lost its connection asks ChangedSince
// for the jobs changed after the last it saw: a walk of the index, each
// job once, as it is now.
package index
