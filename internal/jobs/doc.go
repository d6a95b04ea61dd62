// Package jobs is the one owner of every job Pollux tracks: the only code
// that reads or writes a job's record (the jobs bucket), its events (the
// record's outbox and the events stream), its check message (the checks
// stream) and its poll counters. The services observe and decide — ingest
// what a submission needs, the poller what follows a poll, the webhook
// applier what a delivery says — and hand the owner their decisions as
// values (Created, Fold and Decision, Notice, an Observation); the owner
// writes, publishes and settles.
//
// # A job's record
//
// The record is a JSON state.Job under the job's id, written with
// compare-and-set only (Create first, Update on the revision read). A
// Record is a record with the revision the owner read it at: services hold
// it between two decisions on the same job and hand it back, so the next
// write needs no read when nobody wrote the job meanwhile. NATS errors end
// here, translated into state.ErrNotFound, ErrExists and ErrConflict; a
// replica's "not found" is confirmed by the bucket's leader first.
//
// # Its events
//
// A write appends the events it causes to the record's outbox, in the
// same write, and the writer publishes them after it (each with
// Nats-Msg-Id job:seq). Nothing writes again just to empty the outbox: the
// next write empties it, after making sure its events are out (the check
// says up to which seq they were published; else the job's latest event in
// the stream says). One write per change. Every writer settles what earlier
// writers left before it makes its own change, even when it then writes
// nothing: a job's end may be in its record only (its writer died before
// publishing it), and whoever ends the job's check is the last to look.
// An end is a result in hand: the poller that ends a job publishes the end
// however long NATS is away (a stop leaves the check out, for its next
// poll to publish it), and an outsider whose end cannot be published fails,
// keeping the check, for its retry to publish it.
//
// # Its check
//
// A tracked job has exactly one check message, its poll timer: the stream
// keeps one message per job subject, and every publish names the message
// it replaces, so a replacement is atomic and nothing leaves a job without
// a check in between. The check carries the job's poll state
// (events.PollState). Its first delivery waits until its due time; each
// later one is a status call (see Delivery, Fold, Polled). A poll that
// learns nothing writes nothing: the check goes back with NakWithDelay,
// and the polls it made since it was published are its deliveries. A poll
// that learns something writes the record and replaces the check; a job
// that ends has its check ended.
//
// A check whose next poll is far away (ParkAfter) is parked instead of
// going back nak-delayed: its holder publishes it, with every poll so far
// counted, as a message schedule on the job's parked subject — expecting
// the check it holds to be the job's latest, so a check replaced meanwhile
// is not parked — and ends its delivery. The schedule fires shortly before
// the poll is due onto the check subject, where its first delivery waits
// out the rest. Only a holder parks; an outsider replacing a parked check
// publishes on the check subject and deletes the parked one (when it fired
// meanwhile, the check it fired replaced the outsider's, which replaces
// that in turn), and one removing it deletes the parked check and what its
// parker left on the check subject. A parked check counts every poll, so
// an outsider ends its job at once. A fire already under way when an
// outsider removes the parked check (microseconds on one server, a
// proposal on a cluster) still lands on the check subject: its first poll
// ends it when the provider says the job ended (one status call more),
// else the record's read at the job's 32nd quiet poll does.
//
// # Counting polls
//
// A job's polls are counted in one place: its check (its content and its
// deliveries), copied into the record at every write; a terminal job's
// record has them all. Only the process holding a delivery sees the polls
// a check made since it was published, so a writer that ends or moves a
// job's check from outside (a webhook, a cancel, a callback) needs a check
// whose content counts every poll: a check of a job that expects a
// webhook — polled rarely, each of its polls publishes a new check — or a
// check whose first poll is not due yet. Any other it leaves for the
// poller: the job ends at once (its events are out), the record says
// PollsOpen, and the check's next delivery makes one status call,
// confirming the end, adds its polls and ends. The Terminal hook sees each
// job once, with its final count.
//
// The count is exact but for three cases, each bounded: a delivery lost in
// transit (the server restarted or its stream leader failed over while the
// delivery was on its way, or the process holding it died) counts as a
// poll although no status call may have been made, one per lost delivery;
// a route repartitioned while a check waits is handed over as a new check,
// forgetting the quiet polls the old one made; and a poll under way when a
// hint brings a counted check forward may go uncounted (one at most).
//
// # Results in hand
//
// A provider's acceptance of a job is never thrown away: Submitted retries
// its write, however long NATS is away, until it lands or the caller's
// context ends (a graceful stop gives a handler its drain time). A submit
// attempt is marked in the record before its call (with a random attempt
// id, so that a mark whose answer was lost is known by its writer), and a
// process that dies during the call leaves the attempt in doubt for ingest
// to resolve.
package jobs
