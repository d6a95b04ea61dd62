// Package spend owns what the apps spend: the price of a job, estimated
// when it is admitted and counted when it ends, and the apps' budgets per
// day and per month, held fleet-wide in the KV bucket pollux-spend so that
// every process of the fleet, and a restarted one, counts against the same
// totals.
//
// The life of a priced job's spend:
//
//	admitted  Ledger.Admit: the job's estimate (Price.Estimate) is
//	          reserved in its app's day and month totals — refused with an
//	          *OverBudgetError when either would pass its budget — and
//	          recorded under the job's id, once: a retried create, a
//	          redelivered submission, a duplicate with the same key all
//	          find the job's reservation and reserve nothing more.
//	ended     Ledger.Settle: the totals move by what the job cost
//	          (Price.Actual) less its estimate, once: the reservation is
//	          marked settled first, and kept (RecordTTL) so that a create
//	          retried after the job ended is not a new one.
//
// The front door admits a create before it answers it (so a refusal is in
// the caller's shape: a face's error, the front door's problem), and
// ingest admits every submission again before it submits it (a submission
// over NATS is refused with a rejected event); the job's reservation makes
// the second a no-op. Status reads and polls never reach this package.
//
// Bounds. Every admission is a compare-and-set of the totals against the
// budget, so the totals never pass a budget through admissions: what
// passes it is only what jobs cost beyond their estimates, at most the
// difference for the jobs admitted and not yet ended (none for per-job
// prices). The totals are reserved before the job's record is written: a
// process that dies in between leaves the estimate counted without a job
// (the totals err high, never low), and a job's record never exists
// without its reservation (TestADayBudgetHoldsThroughAKill found the
// other order let a retry of a create whose gateway died run uncounted).
// A process that dies between a job's end and its settlement leaves the
// estimate counted instead of the actual.
package spend
