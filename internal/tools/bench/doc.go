// Package bench is `pollux bench` (and `make bench`): it measures the fleet
// against the limit of the engine underneath, and prints one table. Every
// rate is measured next to the raw JetStream figure for the same work, on
// the same nats-server process, in the same run:
//
//   - micro: one schedule decision, one event encode and decode, one check
//     and one job record decode (testing.Benchmark: ns and allocations per
//     op);
//   - cycles: check cycles per second through the real poller against an
//     instant in-process provider (every poll quiet: no KV), vs the raw
//     fetch + NakWithDelay cycle, the median of three alternating rounds;
//     and vs a raw cycle that also reads and writes a record in KV;
//   - fleet: status calls per second through 1, 2 and 4 poller processes
//     against the simulated provider over HTTP; and what a never-binding
//     status budget adds to a poll's cost (poller and nats-server CPU per
//     call), one process with the budget off and on in three alternating
//     rounds, the median ratio reported;
//   - ingest: submissions per second through ingest vs raw KV Create, and
//     the server CPU each costs; and the KV writes a job costs from its
//     submission to its end, for jobs of a scripted provider that go
//     queued → running → succeeded through the real ingest and poller
//     (the fresh bucket's last stream sequence is every write made; the
//     events stream says what each job went through);
//   - limits: the simulated provider's hidden limits (4 running, 5 calls
//     a second, 429 without Retry-After past either) and a route that
//     configures nothing but learn_running and learn_rate, with a backlog
//     it cannot finish (the whole stack in-process, as pollux dev runs
//     it): after two minutes of learning, the provider's running jobs
//     sampled each second against the hidden cap, the calls it counted
//     against the hidden rate, and the share of them it answered 429,
//     over the next two minutes;
//   - webhook: signed deliveries per second and p99 time to a 2xx;
//   - faces: a provider face (Replicate's, as its SDK calls it) on the
//     whole stack in-process: status answers through the face at a fixed
//     2,000 a second, p50/p99 from when each was due, next to the front
//     door's GET /v1/jobs/{id} at the same rate, and the most answers a
//     second 32 clients get; and the provider's status calls per
//     completion when 50 clients poll every job every 500 ms (the SDK's
//     interval), next to one client's;
//   - uploads: input files through the faces into the inputs bucket:
//     50 MB files through Replicate's multipart POST /v1/files and
//     through fal's upload URL (a plain PUT), MB/s next to a plain Object
//     Store put of the same bytes (target ≥ 0.5), and the RSS ten
//     concurrent 50 MB uploads add (target < 64 MB);
//   - index: the jobs index (internal/edge/index) over 100,000 jobs' events in
//     the stream: replay into a fresh index, p50/p99 of a page filtered by
//     route and state (first five pages by cursor), of one filtered by
//     route and creation time, and of a search; the CPU per page; the Go
//     heap per job; and the writes building the index made (0 per job);
//   - capacity: 1M and 3M tracked jobs, polls spread at 2000/s, checks
//     parked as they are by default; at 1M also the workload mix (20 % of
//     the jobs due within the first minute, the rest spread over the poll
//     interval) and the same with parking off (every check nak-delayed
//     in the consumer): server and poller memory per job,
//     checks ack-pending in the consumer, server CPU and CPU per poll,
//     poll lateness p50/p99 over a 150 s window (longer than the file
//     store's periodic write of a stream's whole state), each 10 s of it
//     shown as it runs;
//   - timers: nak-delayed messages vs message schedules (Nats-Schedule) as
//     the timer, at 100k and 300k: memory, CPU waiting and firing,
//     lateness;
//   - cluster: the cycle measurement on a three-node cluster, R3; and the
//     1M capacity run there, its checks over three partitions, each
//     node's CPU and memory.
//
// Jobs are written straight into the jobs bucket and the checks stream for
// the measurements that are not about ingest (seed), as ingest would
// leave them. The NATS servers and poller processes are children of the
// bench; their memory and CPU come from /proc (Linux).
//
// # Where nats-server's CPU goes with a million checks waiting
//
// --server-pprof PORT has the (single) nats-server serve its pprof, so a
// section can be profiled while it runs:
//
//	pollux bench --only capacity --sizes 1000000 --partitions 1 --server-pprof 6061
//	go tool pprof -top http://127.0.0.1:6061/debug/pprof/profile?seconds=20
//
// Measured on this 2-core machine (nats-server v2.15.2, 2026-12-02), one
// checks consumer with 1,000,000 checks nak-delayed (ack-pending):
//
//	                                 waiting (none due)   2000 polls/s due and made
//	server CPU                       110 % of a core      144 % (127-143 % over the section's window, two runs)
//	(*consumer).checkPending         13 %                 42 %
//	encodeConsumerState              41 %                 44 %
//	Go GC (scan, mark, write barriers) ~25 %              ~10 %
//	parsing, acks, naks, delivery    < 10 %               < 3 %
//
// The polls themselves cost almost nothing; what costs is per waiting
// check: checkPending is the redelivery timer walking every ack-pending
// entry of the consumer on each tick, and encodeConsumerState writes the
// consumer's whole state — every pending entry — each time the file store
// flushes it after acks and naks. Both are O(ack-pending) and run whatever
// the poll rate, which is why a poll costs the server ~640 µs at 1M
// tracked and ~55 µs at 20k. Splitting the checks over partitions does not
// shrink the sum (each partition's consumer scans and encodes its own
// share: 4 partitions measured 184 %). What would: fewer checks
// ack-pending on the consumer that polls — the long waits parked where a
// waiting message costs nothing per tick, only near-term checks
// nak-delayed.
//
// # Parked checks
//
// That is what Pollux does (events.Options.ParkAfter, package jobs): a
// check whose next poll is a minute or more away waits as a message
// schedule and fires 1 s before it is due. The candidates, side by side:
//
//   - nak-delay only (before): O(ack-pending) consumer work, above.
//   - a coarser consumer for far-future checks: a second consumer holds
//     the same ack-pending entries, so the same O(ack-pending) work;
//     consumer settings change none of it (AckWait and MaxAckPending do
//     not enter the scan; BackOff adds to every nak).
//   - a parked-checks stream read by due time (subjects by minute,
//     drained by a sweeper): Pollux would own a timer wheel, its leader
//     election and its restarts.
//   - message schedules (chosen): the server's own timer wheel, per
//     message, replicated and recovered with the stream (its state file
//     is written with the stream's), and the check stays a message of the
//     checks stream, so "one check per job" stays one expectation on the
//     job's two subjects.
//
// Measured side by side (make bench, 150 s windows, 2000 polls/s; the
// second table of docs/performance.md): at 1M tracked the server spends 25 % of a core
// (127 µs a poll) with checks parked against 125 % (622 µs) with every
// check nak-delayed, p50 lateness 48 ms against 340 ms; at 3M 31 %
// (157 µs), 533 B of server memory per job, p99 109 ms. Profiled at 1M
// with the 1 s lead (60 s of the window, 26 % of a core), the server's
// work is per poll: firing (runMsgScheduling, 21 % of its CPU, 8 % of it
// the timer wheel's walk for what is due), storing messages (12 %, 7 %
// in write syscalls), the park's roll-up of its own subject (7 %), the
// term of the held check (6.5 %), the wildcard expectation's last-message
// lookup (5 %) — plus GC (19 %) over a ~0.8 GB heap; the consumer's
// redelivery scan is 2 % (19 % with a 5 s lead and 11,000 checks back
// early) and its state encoding under 1 %. The scan is why the
// lead is short and exact: the fire time carries its fraction of a
// second (events.ScheduleAt); rounded down to the second, a 2 s lead
// brought checks back 2-3 s early, ~4,000 pending at 1M, and cost 152 µs
// a poll and p99 295 ms against 138 µs and 115 ms with 1 s exact (~1,600
// pending), the two run back to back on the same machine.
//
// What parking does not remove: every 2-2.5 minutes the file store writes
// the checks stream's whole state, its per-subject index (41 MB at 1M
// jobs) and, with schedules, their state (50 MB), holding the stream for
// up to a second; polls due then come that late (one 10 s slice with a
// p99 of 0.6 s with the 1 s lead, 1.0 s with the 2 s one, 1.5-2.2 s on a
// slower machine, while the others stay near 110 ms; correlated with the
// files' write times). A stream of more than a million subjects skips
// that write (nats-server's threshold), so 3M shows none. It grows with
// the jobs tracked by one stream; splitting the checks over several
// streams would shrink each write (not done: it changes the wire
// contract).
package bench
