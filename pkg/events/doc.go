// Package events is Pollux's v1 wire contract: subject names, the streams,
// consumers and KV buckets behind them, the message types with their
// validating decoders, and the mapping of a handler's outcome to
// Ack/NakWithDelay/Term.
//
// # Subjects
//
// With the default prefix "pollux" (<route> and <job> are tokens of
// [A-Za-z0-9_-], at most 128 bytes):
//
//	pollux.submit.<route>        POLLUX_INTAKE   (work queue)  Submit
//	pollux.track.<route>         POLLUX_INTAKE                 Track
//	pollux.cancel.<route>        POLLUX_INTAKE                 Cancel
//	pollux.checks.<route>.<slot>.<job>  POLLUX_CHECKS   (work queue, one message per subject)  Check
//	pollux.parked.<route>.<slot>.<job>  POLLUX_CHECKS   (message schedule onto the check subject)  Check
//	pollux.webhooks.<route>      POLLUX_WEBHOOKS (work queue, long duplicate window)    raw deliveries
//	pollux.slots.<route>.<kind>.<i>  POLLUX_SLOTS  (work queue, one per subject)  budget leases
//	pollux.events.<route>.<job>  POLLUX_EVENTS   (limits, max age)                      Event
//
// KV buckets: pollux-jobs (the job records, see package state),
// pollux-routes (route pauses), pollux-stats (learned durations),
// pollux-limits (learned call rates, key LimitsKey), pollux-deliveries
// (webhook delivery ids seen) and, where outbound webhooks are configured,
// pollux-outbox (each job's delivery state at each endpoint,
// OutboxDelivery, read with OutboxDeliveries).
//
// # A submission's way
//
// What each party uses of the package, as Example runs it:
//
//	party        does                                   with
//	any process  provisions the streams, buckets and    Namespace.Setup, EnsureConsumer
//	             consumers (one not Pollux's: an        (Setup is idempotent and safe
//	             *IncompatibleError, left alone)        to run concurrently)
//	a client     publishes a submission on its route    Submit, Namespace.Submit
//	ingest       takes it from the route's consumer     Namespace.IngestConsumerConfig,
//	                                                    Namespace.ParseIntake
//	             decodes it (bad input: *FieldError,    DecodeSubmit, KeyID
//	             answered with a rejected event)
//	             settles the message in one place       Done, Later, Stop; Outcome.Settle
//	the owner    publishes each event of the job once   NewEvent, Event.Encode, MsgID
//	             on the job's subject                   (Nats-Msg-Id), Namespace.Event
//	subscribers  read a job's events                    Namespace.EventsStream, DecodeEvent
//
// # Messages
//
// Every message is a JSON object with "v": 1. Unknown fields are ignored, so
// later minor additions do not break older readers; a change that would
// break a reader gets a new "v" and new subjects. Decoders reject bad input
// with a *FieldError that names the offending field.
//
// # Checks
//
// A job's check message is its poll timer, and a small versioned message
// of its own (Check): the job id, when its first poll is due, and the
// job's poll state (PollState: what a poll needs — remote id, model, state,
// progress, times, schedule counters — as of the check's publication). The
// polls a check made since are its delivery count, so a poll that learns
// nothing changes no message and no record; one that learns something
// makes the jobs' owner publish a new check in place of the old one. A
// check from before poll states (a "not_before" time and a partial "job"
// record) still decodes, with its due time and no poll state: its job's
// record then says what to poll.
//
// A check whose next poll is Options.ParkAfter or more away (default one
// minute) is parked by the poller that holds it: published on the job's
// parked subject as a message schedule (Nats-Schedule "@at", targeting the
// job's check subject) instead of going back nak-delayed. A nak-delayed
// check waits ack-pending in the poller's consumer, and the server's
// consumer work is proportional to those: its redelivery timer walks
// every pending entry and every state write encodes them all. A parked
// one waits in the stream's scheduler (a timing wheel) at no cost per
// tick, and fires ParkedLead before its poll is due, onto its check
// subject, where its first delivery waits out the rest nak-delayed — so a
// parked poll is as punctual as any. Whatever a job's check is, it is the
// latest message on CheckOrParked, and every publish of a check expects
// that message (Nats-Expected-Last-Subject-Sequence with its -Subject), so
// parking, replacing and arming stay one step each.
//
// # Outcomes
//
// Handlers return an Outcome (Done, Later, Stop) rather than settling
// messages themselves; Outcome.Settle is the one place that turns it into
// Ack, NakWithDelay or Term.
//
// # Invariants and the tests that guard them
//
//	a decoder refuses bad input, naming the field      TestDecodeSubmit, TestDecodeTrackAndCancel,
//	                                                   FuzzDecodeSubmit, FuzzDecodeTrack, FuzzDecodeCheck
//	the Go types and the published JSON Schemas agree  TestGoValuesMatchSchemas, TestSchemaFieldsMatchGoTypes,
//	                                                   TestInvalidMessagesRefusedByBoth
//	subject tokens are bounded, names are one scheme   TestValidToken, TestNamespace
//	Setup is idempotent and leaves what is not         TestSetupIdempotentAndConcurrent,
//	Pollux's alone                                     TestSetupReportsIncompatibleStream
//	a job has one check message                        TestChecksStreamHoldsOneMessagePerJob
//	an outcome settles as it says                      TestOutcomeSettle
//	an event published twice is stored once            Example
package events
