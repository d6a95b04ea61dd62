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
//   - index: the jobs index (internal/index) over 100,000 jobs' events in
//     the stream: replay into a fresh index, p50/p99 of a page filtered by
//     route and state (first five pages by cursor), of one filtered by
//     route and creation time, and of a search; the CPU per page; the Go
//     heap per job; and the writes building the index made (0 per job);
//   - capacity: 100k and 300k tracked jobs (and the largest again,
//     partitioned), polls spread at 2000/s: server and poller memory per
//     job, server CPU, poll lateness p50/p99;
//   - timers: nak-delayed messages vs message schedules (Nats-Schedule) as
//     the timer, at the same sizes: memory, CPU waiting and firing,
//     lateness;
//   - cluster: the cycle measurement on a three-node cluster, R3.
//
// Jobs are written straight into the jobs bucket and the checks stream for
// the measurements that are not about ingest (seed), as ingest would
// leave them. The NATS servers and poller processes are children of the
// bench; their memory and CPU come from /proc (Linux).
package bench
